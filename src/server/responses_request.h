// Parses and validates a /v1/responses body (OpenAI's Responses API) into the chat request it
// asks for: `instructions`, the previous response's context (previous_response_id, looked up in
// the ResponseStore by the handler) and the `input` items become chat messages, the flat
// function tools, `text.format` and `reasoning.effort` the chat fields they correspond to. What
// would need a stored conversation or a queue (conversation, background) is refused by name.
#pragma once

#include <optional>
#include <string>

#include "server/json.h"
#include "server/openai_request.h"

namespace mkserve::server {

struct ResponsesRequest {
  ChatRequest chat;
  // The request's settings as the response object repeats them: instructions, max_output_tokens,
  // tools, tool_choice, text, reasoning, temperature, top_p, parallel_tool_calls, metadata, user.
  Json echo = Json::object();
  // The request's own input items (a string input as one user message), for the store.
  Json input_items = Json::array();
  bool store = true;  // keep the finished response (`store`, true unless sent false)
  // Run detached from the connection (background_responses.h): answered at once "in_progress",
  // then polled. Needs store; not streamed.
  bool background = false;
  // `conversation` (its items came in `context`; the finished response's items join it), or "".
  std::string conversation_id;
};

// The body's previous_response_id, if it has one (a non-empty string; else ApiError).
std::optional<std::string> PreviousResponseId(const Json& body);
// The body's `conversation` id (a string, or {"id": ...}), if it has one; ApiError for another
// shape or beside previous_response_id.
std::optional<std::string> ConversationId(const Json& body);

// Throws ApiError naming `param`[i] unless every item is one /v1/responses reads as input
// (conversation items are checked the same way when they are added).
void CheckInputItems(const Json& items, const std::string& param,
                     const Json& before = Json::array());
// An item as stored and listed: with `id` unless it has one, a message typed and its string
// content as one input_text (output_text for the assistant) part, as OpenAI lists them.
Json ListedItem(Json item, const std::string& id);

// `context`: the items the previous response left (StoredResponse::context), which come after
// the instructions and before the input; empty without previous_response_id.
ResponsesRequest ParseResponsesRequest(const Json& body, const Json& context = Json::array());

}  // namespace mkserve::server
