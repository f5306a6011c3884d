#include "tokenizer/incremental_detokenizer.h"

#include <span>

namespace mkserve::tokenizer {

namespace {

constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string IncrementalDetokenizer::DecodeRange(size_t begin, size_t end) const {
  return tokenizer_->Decode(std::span<const int32_t>(ids_).subspan(begin, end - begin),
                            skip_special_tokens_);
}

std::string IncrementalDetokenizer::Next(int32_t id) {
  ids_.push_back(id);
  std::string prefix_text = DecodeRange(prefix_offset_, read_offset_);
  std::string new_text = DecodeRange(prefix_offset_, ids_.size());
  // Hold back while the newest character may still be completed by the next id.
  if (new_text.size() <= prefix_text.size() || new_text.ends_with(kReplacementUtf8)) return {};
  if (!new_text.starts_with(prefix_text)) return {};  // decoders here never rewrite the prefix
  std::string delta = new_text.substr(prefix_text.size());
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  return delta;
}

std::string IncrementalDetokenizer::Flush() {
  std::string prefix_text = DecodeRange(prefix_offset_, read_offset_);
  std::string new_text = DecodeRange(prefix_offset_, ids_.size());
  prefix_offset_ = read_offset_ = ids_.size();
  if (new_text.size() <= prefix_text.size() || !new_text.starts_with(prefix_text)) return {};
  return new_text.substr(prefix_text.size());
}

}  // namespace mkserve::tokenizer
