// Parses and validates a /v1/chat/completions body (and the chat form of /tokenize).
#pragma once

#include <nlohmann/json.hpp>

#include "server/openai_request.h"

namespace mkserve::server {

ChatRequest ParseChatRequest(const nlohmann::json& body);

// `messages`: roles, string or text-part content, assistant tool calls, tool results.
std::vector<ChatMessage> ParseMessages(const nlohmann::json& messages, const std::string& param);

}  // namespace mkserve::server
