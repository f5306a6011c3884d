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

// Applies the model-dependent checks to one prompt of `prompt_tokens` tokens and fills in
// max_tokens when the request left it out (chat: up to the context limit).
void ApplyModelLimits(const ServedModel& model, int64_t prompt_tokens, bool default_to_context,
                      GenerationRequest& request);

}  // namespace mkserve::server
