// Parses and validates a /v1/chat/completions body (and the chat form of /tokenize).
#pragma once

#include "server/json.h"

#include "server/openai_request.h"

namespace mkserve::server {

ChatRequest ParseChatRequest(const Json& body);

}  // namespace mkserve::server
