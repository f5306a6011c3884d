// Parses and validates /v1/completions, /tokenize and /detokenize bodies.
#pragma once

#include <nlohmann/json.hpp>

#include "server/openai_request.h"

namespace mkserve::server {

// `prompt` in all four OpenAI forms: a string, a list of strings, a list of token ids, or a list
// of token-id lists.
CompletionRequest ParseCompletionRequest(const nlohmann::json& body);

TokenizeRequest ParseTokenizeRequest(const nlohmann::json& body);
DetokenizeRequest ParseDetokenizeRequest(const nlohmann::json& body);

}  // namespace mkserve::server
