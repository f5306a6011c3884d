// Checks that need the loaded model: token ids inside the vocabulary, the prompt inside the
// context, and the default max_tokens (what is left of the context) for requests without one.
#pragma once

#include <cstdint>
#include <span>

#include "server/openai_request.h"
#include "server/server_state.h"

namespace mkserve::server {

// Throws ApiError naming `param` when an id is outside [0, vocab_size).
void CheckTokenIds(const ServedModel& model, std::span<const int32_t> ids,
                   const std::string& param);

// How an endpoint names the prompt and the token limit in its errors, and what the limit is when
// a request leaves it out.
struct PromptFields {
  const char* prompt;       // "messages", "prompt", "input"
  const char* max_tokens;   // "max_tokens", "max_output_tokens"
  bool default_to_context;  // no limit given: the rest of the context (else the request's 16)
};
inline constexpr PromptFields kChatFields{"messages", "max_tokens", true};
inline constexpr PromptFields kCompletionFields{"prompt", "max_tokens", false};
inline constexpr PromptFields kResponsesFields{"input", "max_output_tokens", true};

// Applies the model-dependent checks to one prompt of `prompt_tokens` tokens and fills in
// max_tokens when the request left it out.
void ApplyModelLimits(const ServedModel& model, int64_t prompt_tokens, const PromptFields& fields,
                      GenerationRequest& request);

}  // namespace mkserve::server
