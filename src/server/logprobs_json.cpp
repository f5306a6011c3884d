#include "server/logprobs_json.h"

#include <algorithm>

namespace mkserve::server {
namespace {

Json Bytes(const std::string& text) {
  Json bytes = Json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

std::string TokenText(const tokenizer::Tokenizer& tokenizer, int32_t token_id) {
  return tokenizer.Decode(std::span<const int32_t>(&token_id, 1), /*skip_special_tokens=*/false);
}

std::string LogprobNames::Name(int32_t token_id) const {
  return token_ids ? "token_id:" + std::to_string(token_id) : TokenText(*tokenizer, token_id);
}

// "bytes" are the token's own bytes (Tokenizer::TokenBytes), as OpenAI gives them: a character
// split over tokens comes back whole from their bytes joined, while each token's "token" text
// shows U+FFFD for its part.
Json ChatLogprobEntry(const LogprobNames& names, const PositionLogprobs& position) {
  const tokenizer::Tokenizer& tokenizer = *names.tokenizer;
  Json top = Json::array();
  for (const TokenLogprob& candidate : position.top) {
    top.push_back({{"token", names.Name(candidate.token_id)},
                   {"logprob", candidate.logprob},
                   {"bytes", Bytes(tokenizer.TokenBytes(candidate.token_id))}});
  }
  return {{"token", names.Name(position.chosen.token_id)},
          {"logprob", position.chosen.logprob},
          {"bytes", Bytes(tokenizer.TokenBytes(position.chosen.token_id))},
          {"top_logprobs", top}};
}

void CompletionLogprobs::AddUnscored(int32_t token_id) {
  Append(token_id, nullptr, nullptr, NextPromptTokenInText());
}

void CompletionLogprobs::AddPrompt(const PositionLogprobs& position) {
  Add(position, NextPromptTokenInText());
}

bool CompletionLogprobs::NextPromptTokenInText() {
  const int64_t at = prompt_added_++;
  return at >= prompt_.before && at < prompt_.total - prompt_.after;
}

void CompletionLogprobs::AddOutput(const PositionLogprobs& position) {
  Add(position, !IsHidden(hidden_.get(), position.chosen.token_id));
}

void CompletionLogprobs::Add(const PositionLogprobs& position, bool in_text) {
  Json top = Json::object();
  for (const TokenLogprob& candidate : position.top) {
    top[names_.Name(candidate.token_id)] = candidate.logprob;
  }
  Append(position.chosen.token_id, position.chosen.logprob, top, in_text);
}

void CompletionLogprobs::Append(int32_t token_id, Json logprob, Json top, bool in_text) {
  tokens_.push_back(names_.Name(token_id));
  token_logprobs_.push_back(std::move(logprob));
  top_logprobs_.push_back(std::move(top));
  // Characters (code points), as Python indexes the text: count the UTF-8 lead bytes so far. A
  // token that starts inside a character (its bytes continue one split over tokens) points at
  // that character. The token's display text would not do: a split character shows as U+FFFD
  // in each of its tokens, three bytes apiece.
  const std::string bytes = names_.tokenizer->TokenBytes(token_id);
  const bool continues = !bytes.empty() && IsContinuationByte(bytes.front());
  text_offset_.push_back(characters_ - (continues && characters_ > 0 ? 1 : 0));
  if (in_text) {
    characters_ +=
        std::count_if(bytes.begin(), bytes.end(), [](char c) { return !IsContinuationByte(c); });
  }
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
