// The sampling and streaming fields shared by chat and completions requests.
#pragma once

#include "server/json_fields.h"
#include "server/openai_request.h"

namespace mkserve::server {

// Upper bounds that keep a single request from monopolising the server.
inline constexpr int64_t kMaxChoices = 16;           // n
inline constexpr int64_t kMaxRequestChoices = 4096;  // prompts x n (completions' prompt lists)
inline constexpr int64_t kMaxTopLogprobs = 20;       // top_logprobs / logprobs
inline constexpr double kMaxLogitBias = 100.0;       // |logit_bias[token]|

// Reads every shared field of `fields` into a GenerationRequest; throws ApiError naming the field.
// `min_max_tokens`: the least max_tokens the endpoint takes (chat 1; completions 0, which with
// echo scores a prompt).
GenerationRequest ParseGenerationFields(const JsonFields& fields, int64_t min_max_tokens);

}  // namespace mkserve::server
