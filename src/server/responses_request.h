// Parses and validates a /v1/responses body (OpenAI's Responses API) into the chat request it
// asks for: `instructions` and the `input` items become chat messages, the flat function tools,
// `text.format` and `reasoning.effort` the chat fields they correspond to. Nothing is stored, so
// what would need a stored response (previous_response_id, conversation, background) is refused
// by name.
#pragma once

#include "server/json.h"
#include "server/openai_request.h"

namespace mkserve::server {

struct ResponsesRequest {
  ChatRequest chat;
  // The request's settings as the response object repeats them: instructions, max_output_tokens,
  // tools, tool_choice, text, reasoning, temperature, top_p, parallel_tool_calls, metadata, user.
  Json echo = Json::object();
};

ResponsesRequest ParseResponsesRequest(const Json& body);

}  // namespace mkserve::server
