#include "server/logprobs_json.h"

namespace mkserve::server {
namespace {

Json Bytes(const std::string& text) {
  Json bytes = Json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

}  // namespace

std::string TokenText(const tokenizer::Tokenizer& tokenizer, int32_t token_id) {
  return tokenizer.Decode(std::span<const int32_t>(&token_id, 1), /*skip_special_tokens=*/false);
}

// "bytes" are the token's own bytes (Tokenizer::TokenBytes), as OpenAI gives them: a character
// split over tokens comes back whole from their bytes joined, while each token's "token" text
// shows U+FFFD for its part.
Json ChatLogprobEntry(const tokenizer::Tokenizer& tokenizer, const PositionLogprobs& position) {
  Json top = Json::array();
  for (const TokenLogprob& candidate : position.top) {
    top.push_back({{"token", TokenText(tokenizer, candidate.token_id)},
                   {"logprob", candidate.logprob},
                   {"bytes", Bytes(tokenizer.TokenBytes(candidate.token_id))}});
  }
  return {{"token", TokenText(tokenizer, position.chosen.token_id)},
          {"logprob", position.chosen.logprob},
          {"bytes", Bytes(tokenizer.TokenBytes(position.chosen.token_id))},
          {"top_logprobs", top}};
}

void CompletionLogprobs::AddUnscored(int32_t token_id) { Append(token_id, nullptr, nullptr); }

void CompletionLogprobs::Add(const PositionLogprobs& position) {
  Json top = Json::object();
  for (const TokenLogprob& candidate : position.top) {
    top[TokenText(*tokenizer_, candidate.token_id)] = candidate.logprob;
  }
  Append(position.chosen.token_id, position.chosen.logprob, top);
}

void CompletionLogprobs::Append(int32_t token_id, Json logprob, Json top) {
  std::string text = TokenText(*tokenizer_, token_id);
  tokens_.push_back(text);
  token_logprobs_.push_back(std::move(logprob));
  top_logprobs_.push_back(std::move(top));
  text_offset_.push_back(offset_);
  offset_ += static_cast<int64_t>(text.size());
}

Json CompletionLogprobs::Take() {
  Json result = {{"tokens", std::move(tokens_)},
                 {"token_logprobs", std::move(token_logprobs_)},
                 {"top_logprobs", std::move(top_logprobs_)},
                 {"text_offset", std::move(text_offset_)}};
  tokens_ = token_logprobs_ = top_logprobs_ = text_offset_ = Json::array();
  return result;
}

}  // namespace mkserve::server
