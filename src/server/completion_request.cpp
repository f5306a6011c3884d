#include "server/completion_request.h"

#include <limits>

#include "server/chat_request.h"
#include "server/generation_request.h"
#include "server/json_fields.h"

namespace mkserve::server {
namespace {

bool IsTokenId(const Json& value) {
  return value.is_number_integer() && value.get<int64_t>() >= 0 &&
         value.get<int64_t>() <= std::numeric_limits<int32_t>::max();
}

std::vector<int32_t> ParseTokenIds(const Json& list, const std::string& param) {
  if (!list.is_array())
    ThrowInvalid(param, "expected an array of token ids, got " + JsonTypeName(list));
  std::vector<int32_t> ids;
  for (size_t i = 0; i < list.size(); ++i) {
    if (!IsTokenId(list[i])) {
      ThrowInvalid(param + "[" + std::to_string(i) + "]", "expected a token id (integer >= 0)");
    }
    ids.push_back(list[i].get<int32_t>());
  }
  return ids;
}

PromptInput TextPrompt(std::string text) { return {std::move(text), {}, false}; }
PromptInput TokenPrompt(std::vector<int32_t> ids) { return {"", std::move(ids), true}; }

// An array prompt's form is set by its first element: numbers (one token prompt), strings
// (a batch of text prompts) or arrays (a batch of token prompts).
std::vector<PromptInput> ParseArrayPrompt(const Json& prompt) {
  if (prompt.empty()) ThrowInvalid("prompt", "must not be an empty array");
  const Json& first = prompt.front();
  if (first.is_number()) return {TokenPrompt(ParseTokenIds(prompt, "prompt"))};
  std::vector<PromptInput> prompts;
  for (size_t i = 0; i < prompt.size(); ++i) {
    std::string param = "prompt[" + std::to_string(i) + "]";
    const Json& item = prompt[i];
    if (first.is_string() && item.is_string()) {
      prompts.push_back(TextPrompt(item.get<std::string>()));
    } else if (first.is_array() && item.is_array()) {
      if (item.empty()) ThrowInvalid(param, "a token prompt must not be empty");
      prompts.push_back(TokenPrompt(ParseTokenIds(item, param)));
    } else {
      ThrowInvalid(param,
                   "prompt lists must hold only strings, only token ids or only token-id "
                   "lists; got " +
                       JsonTypeName(item));
    }
  }
  return prompts;
}

std::vector<PromptInput> ParsePrompt(const JsonFields& fields) {
  const Json* prompt = fields.Get("prompt");
  if (prompt == nullptr) ThrowInvalid("prompt", "is required");
  if (prompt->is_string()) return {TextPrompt(prompt->get<std::string>())};
  if (!prompt->is_array()) {
    ThrowInvalid("prompt",
                 "expected a string, a list of strings, a list of token ids or a list of "
                 "token-id lists; got " +
                     JsonTypeName(*prompt));
  }
  return ParseArrayPrompt(*prompt);
}

}  // namespace

CompletionRequest ParseCompletionRequest(const Json& body) {
  JsonFields fields(body, "");
  CompletionRequest request;
  request.prompts = ParsePrompt(fields);
  request.generation = ParseGenerationFields(fields, /*min_max_tokens=*/0);
  request.echo = fields.Bool("echo").value_or(false);
  request.add_special_tokens = fields.Bool("add_special_tokens").value_or(true);
  std::optional<int64_t> logprobs = fields.Integer("logprobs", 0, kMaxTopLogprobs);
  SamplingParams& sampling = request.generation.sampling;
  if (logprobs) {
    sampling.num_logprobs = static_cast<int32_t>(*logprobs);
    // With echo, evaluation harnesses read the prompt tokens' logprobs too.
    if (request.echo) sampling.num_prompt_logprobs = static_cast<int32_t>(*logprobs);
  }
  if (fields.Get("suffix") != nullptr) ThrowInvalid("suffix", "is not supported by this model");
  // best_of > n would rank candidates by likelihood, which mkserve does not do.
  std::optional<int64_t> best_of = fields.Integer("best_of", 1, kMaxChoices);
  if (best_of && *best_of != request.generation.n) {
    ThrowInvalid("best_of", "only best_of equal to n (" + std::to_string(request.generation.n) +
                                ") is supported");
  }
  if (!request.generation.has_max_tokens) sampling.max_tokens = 16;  // the OpenAI default
  const int64_t choices = static_cast<int64_t>(request.prompts.size()) * request.generation.n;
  if (choices > kMaxRequestChoices) {
    ThrowInvalid("prompt", "a request may ask for at most " + std::to_string(kMaxRequestChoices) +
                               " choices (prompts x n); this one asks for " +
                               std::to_string(request.prompts.size()) + " x " +
                               std::to_string(request.generation.n));
  }
  return request;
}

TokenizeRequest ParseTokenizeRequest(const Json& body) {
  JsonFields fields(body, "");
  TokenizeRequest request;
  request.model = fields.String("model").value_or("");
  request.add_special_tokens = fields.Bool("add_special_tokens").value_or(true);
  // The chat form takes every field of a chat request that shapes the prompt.
  if (fields.Get("messages") != nullptr) {
    if (fields.Get("prompt") != nullptr) {
      ThrowInvalid("prompt", "send either 'prompt' or 'messages', not both");
    }
    request.chat = ParseChatRequest(body);
    return request;
  }
  std::optional<std::string> prompt = fields.String("prompt");
  if (!prompt) ThrowInvalid("prompt", "is required (or send 'messages')");
  request.prompt = *prompt;
  return request;
}

DetokenizeRequest ParseDetokenizeRequest(const Json& body) {
  JsonFields fields(body, "");
  DetokenizeRequest request;
  request.model = fields.String("model").value_or("");
  const Json* tokens = fields.Get("tokens");
  if (tokens == nullptr) ThrowInvalid("tokens", "is required");
  request.token_ids = ParseTokenIds(*tokens, "tokens");
  return request;
}

}  // namespace mkserve::server
