// Logprobs in the two OpenAI shapes: chat (`choices[].logprobs.content[]` entries with token,
// logprob, bytes, top_logprobs) and legacy completions (parallel `tokens`, `token_logprobs`,
// `top_logprobs`, `text_offset` arrays).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend.h"
#include "server/json.h"
#include "tokenizer/tokenizer.h"

namespace mkserve::server {

// The text of one token as clients see it (special tokens included).
std::string TokenText(const tokenizer::Tokenizer& tokenizer, int32_t token_id);

// One `content[]` entry of chat logprobs.
Json ChatLogprobEntry(const tokenizer::Tokenizer& tokenizer, const PositionLogprobs& position);

// Completions logprobs, built up position by position.
class CompletionLogprobs {
 public:
  // `tokenizer` may be null when no logprobs are asked for (nothing is ever added then).
  explicit CompletionLogprobs(const tokenizer::Tokenizer* tokenizer) : tokenizer_(tokenizer) {}

  // A position without a logprob (the first prompt token under echo).
  void AddUnscored(int32_t token_id);
  void Add(const PositionLogprobs& position);
  bool empty() const { return tokens_.empty(); }
  // The four arrays; clears them, so streaming can send each position once.
  Json Take();

 private:
  void Append(int32_t token_id, Json logprob, Json top);

  const tokenizer::Tokenizer* tokenizer_;
  Json tokens_ = Json::array();
  Json token_logprobs_ = Json::array();
  Json top_logprobs_ = Json::array();
  Json text_offset_ = Json::array();
  int64_t offset_ = 0;
};

}  // namespace mkserve::server
