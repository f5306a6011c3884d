// Parses and validates /v1/completions, /tokenize and /detokenize bodies.
#pragma once

#include "server/json.h"

#include "server/openai_request.h"

namespace mkserve::server {

// `prompt` in all four OpenAI forms: a string, a list of strings, a list of token ids, or a list
// of token-id lists.
CompletionRequest ParseCompletionRequest(const Json& body);

TokenizeRequest ParseTokenizeRequest(const Json& body);
DetokenizeRequest ParseDetokenizeRequest(const Json& body);

}  // namespace mkserve::server
