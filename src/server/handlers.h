// The endpoint handlers. Each parses its body into a request struct, validates it, and hands the
// work to the engine; errors leave as ApiError, which the route table's wrapper turns into an
// OpenAI error response (routes.cpp). The output-parser factory picks the model's chat format.
#pragma once

#include "server/http_types.h"
#include "server/server_metrics.h"
#include "server/server_state.h"

namespace mkserve::server {

HttpResponse HandleChatCompletions(const ServerState& state, const HttpRequest& request);
HttpResponse HandleCompletions(const ServerState& state, const HttpRequest& request);
HttpResponse HandleResponses(const ServerState& state, const HttpRequest& request);
// POST /v1/responses/input_tokens: the input tokens a /v1/responses body would have.
HttpResponse HandleResponsesInputTokens(const ServerState& state, const HttpRequest& request);
// GET / DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items: the ResponseStore;
// POST /v1/responses/{id}/cancel: stops a running background response (BackgroundResponses).
HttpResponse HandleStoredResponse(const ServerState& state, const HttpRequest& request);
// POST /v1/conversations; GET, POST, DELETE /v1/conversations/{id}[/items[/{item_id}]].
HttpResponse HandleConversations(const ServerState& state, const HttpRequest& request);
HttpResponse HandleConversation(const ServerState& state, const HttpRequest& request);
// The items of conversation `id`, for /v1/responses' `conversation`; ApiError (404) naming
// `param` when it is not kept.
Json ConversationItems(const ServerState& state, const std::string& id, const std::string& param);
HttpResponse HandleTokenize(const ServerState& state, const HttpRequest& request);
HttpResponse HandleDetokenize(const ServerState& state, const HttpRequest& request);
HttpResponse HandleModels(const ServerState& state, const HttpRequest& request);
HttpResponse HandleModel(const ServerState& state, const HttpRequest& request);  // /v1/models/ID
HttpResponse HandleHealth(const ServerState& state, const HttpRequest& request);
HttpResponse HandleMetrics(const ServerState& state, const HttpCounters& counters,
                           const HttpRequest& request);

}  // namespace mkserve::server
