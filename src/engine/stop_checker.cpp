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
  stop_strings_apply_ = num_output_tokens >= params_.min_tokens;
  bool at_length = num_output_tokens >= params_.max_tokens || num_tokens >= max_model_len_;
  if (stop_strings_apply_ && IsStopToken(token_id)) {
    out.emit_token = false;
    out.finish = FinishReason::kStop;
    out.text = Flush(&out.stop_string);
    return out;
  }
  if (text_) AddPending(text_->Append(token_id));
  if (at_length) {  // the decoder's held-back tail is released now, so it is checked too
    out.text = Flush(&out.stop_string);
    out.finish = out.stop_string.empty() ? FinishReason::kLength : FinishReason::kStop;
    return out;
  }
  if (std::optional<std::string> before = CutAtStopString(out.stop_string)) {
    out.text = std::move(*before);
    out.finish = FinishReason::kStop;
    return out;
  }
  out.text = stop_strings_apply_ ? ReleaseUndecided() : TakePending();
  return out;
}

std::string StopChecker::Flush(std::string* matched_stop) {
  if (text_) AddPending({text_->Flush()});
  std::string matched;
  std::optional<std::string> before = CutAtStopString(matched);
  if (matched_stop != nullptr) *matched_stop = matched;
  return before ? *before : TakePending();
}

std::string StopChecker::TakePending() {
  pending_whole_.clear();
  return std::exchange(pending_, {});
}

void StopChecker::AddPending(TokenText piece) {
  if (piece.whole_bytes > 0) {
    const size_t end = pending_.size() + piece.text.size();
    pending_whole_.emplace_back(end - piece.whole_bytes, end);
  }
  pending_ += piece.text;
}

bool StopChecker::MatchKeepsWholeTokens(size_t begin, size_t end) const {
  for (const auto& [whole_begin, whole_end] : pending_whole_) {
    const bool overlaps = whole_begin < end && begin < whole_end;
    const bool inside = begin <= whole_begin && whole_end <= end;
    if (overlaps && !inside) return false;
  }
  return true;
}

std::optional<std::string> StopChecker::CutAtStopString(std::string& matched) {
  if (!stop_strings_apply_) return std::nullopt;
  size_t first = std::string::npos;
  for (const std::string& stop : params_.stop) {
    if (stop.empty()) continue;
    size_t at = pending_.find(stop);
    while (at < first && !MatchKeepsWholeTokens(at, at + stop.size())) {
      at = pending_.find(stop, at + 1);
    }
    if (at < first) {
      first = at;
      matched = stop;
    }
  }
  if (first == std::string::npos) return std::nullopt;
  std::string before = TakePending();
  before.resize(params_.include_stop_str_in_output ? first + matched.size() : first);
  return before;
}

std::string StopChecker::ReleaseUndecided() {
  size_t keep = 0;
  for (const std::string& stop : params_.stop) {
    size_t longest = std::min(stop.size() - (stop.empty() ? 0 : 1), pending_.size());
    for (size_t len = longest; len > keep; --len) {
      const size_t begin = pending_.size() - len;
      if (pending_.compare(begin, len, stop, 0, len) == 0 &&
          MatchKeepsWholeTokens(begin, begin + stop.size())) {
        keep = len;
        break;
      }
    }
  }
  const size_t released = pending_.size() - keep;
  std::string out = pending_.substr(0, released);
  pending_.erase(0, released);
  // The kept suffix never starts inside a whole token's text: the rest move with it.
  std::erase_if(pending_whole_, [&](const auto& span) { return span.second <= released; });
  for (auto& [begin, end] : pending_whole_) {
    begin -= released;
    end -= released;
  }
  return out;
}

}  // namespace mkserve
