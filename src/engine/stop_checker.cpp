#include "engine/stop_checker.h"

#include <algorithm>
#include <utility>

namespace mkserve {

StopChecker::StopChecker(const SamplingParams& params, std::span<const int32_t> eos_token_ids,
                         int64_t max_model_len, std::unique_ptr<TokenTextStream> text)
    : params_(params),
      stop_token_ids_(params.stop_token_ids),
      max_model_len_(max_model_len),
      text_(std::move(text)) {
  if (!params.ignore_eos) {
    stop_token_ids_.insert(stop_token_ids_.end(), eos_token_ids.begin(), eos_token_ids.end());
  }
}

bool StopChecker::IsStopToken(int32_t token_id) const {
  return std::find(stop_token_ids_.begin(), stop_token_ids_.end(), token_id) !=
         stop_token_ids_.end();
}

StopOutcome StopChecker::Append(int32_t token_id, int64_t num_output_tokens, int64_t num_tokens) {
  StopOutcome out;
  bool can_stop = num_output_tokens >= params_.min_tokens;
  bool at_length = num_output_tokens >= params_.max_tokens || num_tokens >= max_model_len_;
  if (can_stop && IsStopToken(token_id)) {
    out.emit_token = false;
    out.finish = FinishReason::kStop;
    out.text = Flush();
    return out;
  }
  if (text_) pending_ += text_->Append(token_id);
  if (can_stop) {
    size_t first = std::string::npos;
    for (const std::string& stop : params_.stop) {
      size_t at = stop.empty() ? std::string::npos : pending_.find(stop);
      if (at < first) {
        first = at;
        out.stop_string = stop;
      }
    }
    if (first != std::string::npos) {
      out.text = pending_.substr(0, first);
      pending_.clear();
      out.finish = FinishReason::kStop;
      return out;
    }
  }
  if (at_length) {
    out.finish = FinishReason::kLength;
    out.text = Flush();
  } else {
    out.text = can_stop ? ReleaseUndecided() : std::exchange(pending_, {});
  }
  return out;
}

std::string StopChecker::Flush() {
  std::string out = std::exchange(pending_, {});
  if (text_) out += text_->Flush();
  return out;
}

std::string StopChecker::ReleaseUndecided() {
  size_t keep = 0;
  for (const std::string& stop : params_.stop) {
    size_t longest = std::min(stop.size() - (stop.empty() ? 0 : 1), pending_.size());
    for (size_t len = longest; len > keep; --len) {
      if (pending_.compare(pending_.size() - len, len, stop, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

}  // namespace mkserve
