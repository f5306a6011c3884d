// Logprobs in the two OpenAI shapes: chat (`choices[].logprobs.content[]` entries with token,
// logprob, bytes, top_logprobs) and legacy completions (parallel `tokens`, `token_logprobs`,
// `top_logprobs`, `text_offset` arrays).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/text_decoder.h"
#include "server/json.h"
#include "tokenizer/tokenizer.h"

namespace mkserve::server {

// The text of one token as clients see it (special tokens included).
std::string TokenText(const tokenizer::Tokenizer& tokenizer, int32_t token_id);

// How logprobs name a token: by its text, or as "token_id:<id>" (vLLM's
// return_tokens_as_token_ids, for clients that rebuild the exact ids).
struct LogprobNames {
  const tokenizer::Tokenizer* tokenizer = nullptr;
  bool token_ids = false;
  std::string Name(int32_t token_id) const;
};

// One `content[]` entry of chat logprobs.
Json ChatLogprobEntry(const LogprobNames& names, const PositionLogprobs& position);

// Of an echoed prompt's tokens, how many at each end the tokenizer added to the text it encoded
// (a BOS): they are no part of the echoed text, so text_offset skips them.
struct EchoedPromptTokens {
  int64_t total = 0;
  int64_t before = 0, after = 0;
};

// Completions logprobs, built up position by position.
class CompletionLogprobs {
 public:
  // `names.tokenizer` may be null when no logprobs are asked for (nothing is ever added then).
  // `hidden` (may be null): generated tokens left out of the text, which text_offset then skips.
  CompletionLogprobs(LogprobNames names, std::shared_ptr<const HiddenTokens> hidden,
                     EchoedPromptTokens prompt = {})
      : names_(names), hidden_(std::move(hidden)), prompt_(prompt) {}

  // A position without a logprob (the first prompt token under echo).
  void AddUnscored(int32_t token_id);
  void AddPrompt(const PositionLogprobs& position);  // an echoed prompt's text is whole
  void AddOutput(const PositionLogprobs& position);
  bool empty() const { return tokens_.empty(); }
  // The four arrays; clears them, so streaming can send each position once.
  Json Take();

 private:
  void Add(const PositionLogprobs& position, bool in_text);
  bool NextPromptTokenInText();
  void Append(int32_t token_id, Json logprob, Json top, bool in_text);

  LogprobNames names_;
  std::shared_ptr<const HiddenTokens> hidden_;
  EchoedPromptTokens prompt_;
  int64_t prompt_added_ = 0;  // prompt positions added so far
  Json tokens_ = Json::array();
  Json token_logprobs_ = Json::array();
  Json top_logprobs_ = Json::array();
  Json text_offset_ = Json::array();
  int64_t characters_ = 0;  // of the text so far
};

}  // namespace mkserve::server
