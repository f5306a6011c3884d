// The sampling and streaming fields shared by chat and completions requests.
#pragma once

#include "server/json_fields.h"
#include "server/openai_request.h"

namespace mkserve::server {

// Upper bounds that keep a single request from monopolising the server.
inline constexpr int64_t kMaxChoices = 16;      // n
inline constexpr int64_t kMaxTopLogprobs = 20;  // top_logprobs / logprobs
inline constexpr double kMaxLogitBias = 100.0;  // |logit_bias[token]|

// Reads every shared field of `fields` into a GenerationRequest; throws ApiError naming the field.
GenerationRequest ParseGenerationFields(const JsonFields& fields);

}  // namespace mkserve::server
