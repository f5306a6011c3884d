// Parses and validates a /v1/chat/completions body (and the chat form of /tokenize).
#pragma once

#include "server/json.h"

#include "server/openai_request.h"

namespace mkserve::server {

ChatRequest ParseChatRequest(const Json& body);

// `messages`: roles, string or text-part content, assistant tool calls, tool results.
std::vector<ChatMessage> ParseMessages(const Json& messages, const std::string& param);

}  // namespace mkserve::server
