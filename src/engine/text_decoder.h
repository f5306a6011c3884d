// TextDecoder: how the engine turns generated token ids into text without depending on the
// tokenizer library. The server adapts src/tokenizer's incremental detokenizer to this interface
// and passes it in EngineOptions; the engine calls it only on its own thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace mkserve {

// Token ids whose text a stream leaves out (a request's skip_special_tokens), indexed by id; ids
// past its end keep their text. Built once per model and kind of request, shared by requests.
using HiddenTokens = std::vector<bool>;

// Whether `hidden` (may be null) leaves out `token_id`'s text.
inline bool IsHidden(const HiddenTokens* hidden, int32_t token_id) {
  return hidden != nullptr && token_id >= 0 && static_cast<size_t>(token_id) < hidden->size() &&
         (*hidden)[static_cast<size_t>(token_id)];
}

// The text that became final with one token. When the token is a whole token (a special token
// or a chat marker such as <|START_TEXT|>), its text is the last `whole_bytes` bytes: a stop
// string matches that text whole or not at all, so "TEXT" never cuts a marker in two.
struct TokenText {
  std::string text;
  size_t whole_bytes = 0;
};

// Incremental detokenization of one sequence's output.
class TokenTextStream {
 public:
  virtual ~TokenTextStream() = default;
  // Empty text while e.g. a UTF-8 character is incomplete.
  virtual TokenText Append(int32_t token_id) = 0;
  // Whatever is still held back when generation ends (e.g. U+FFFD for a dangling byte sequence).
  virtual std::string Flush() = 0;
};

class TextDecoder {
 public:
  virtual ~TextDecoder() = default;
  // A fresh stream for one sequence; the prompt is context (e.g. for leading-space rules).
  // `hidden` (may be null) names the ids whose text it leaves out.
  virtual std::unique_ptr<TokenTextStream> NewStream(
      std::span<const int32_t> prompt_token_ids,
      std::shared_ptr<const HiddenTokens> hidden) const = 0;
};

}  // namespace mkserve
