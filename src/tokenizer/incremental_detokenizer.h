// Turns a stream of generated token ids into text deltas. Every delta is valid UTF-8 and is never
// taken back: text whose last character is still incomplete (a partial UTF-8 sequence from
// byte-level or byte-fallback tokens, decoded as U+FFFD) is held until the next id completes it.
// The concatenation of all deltas plus Flush() equals Decode() of all ids.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace mkserve::tokenizer {

class IncrementalDetokenizer {
 public:
  // `tokenizer` must outlive this object.
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens);

  // Appends `id` and returns the text that became final (often empty).
  std::string Next(int32_t id);
  // Returns the text still held back (for example a trailing U+FFFD at the end of generation).
  std::string Flush();

  const std::vector<int32_t>& ids() const { return ids_; }

 private:
  std::string DecodeRange(size_t begin, size_t end) const;

  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  std::vector<int32_t> ids_;
  // Decoding restarts at prefix_offset_ so that decoders which treat the first token specially
  // (Metaspace, Strip) see the same context as a full decode; text of ids before read_offset_
  // has been emitted already.
  size_t prefix_offset_ = 0;
  size_t read_offset_ = 0;
};

}  // namespace mkserve::tokenizer
