#include "server/routes.h"

#include <cstdio>

#include "common/error.h"
#include "server/error.h"
#include "server/handlers.h"

namespace mkserve::server {
namespace {

// The one place handler exceptions stop: ApiError keeps its kind; mkserve::Error from a module
// (tokenizer, template) is a bad input; anything else is a bug and answers 500.
Handler Guard(Handler handler) {
  return [handler = std::move(handler)](const HttpRequest& request) {
    HttpResponse response;
    try {
      response = handler(request);
    } catch (const ApiError& error) {
      response = ErrorResponse(error);
    } catch (const Error& error) {
      response = ErrorResponse(ApiError(ErrorKind::kInvalidRequest, error.what()));
    } catch (const std::exception& error) {
      std::fprintf(stderr, "mkserve serve: internal error on %s %s: %s\n", request.method.c_str(),
                   request.path.c_str(), error.what());
      response = ErrorResponse(
          ApiError(ErrorKind::kInternal, "internal error: " + std::string(error.what())));
    }
    return response;
  };
}

}  // namespace

void RegisterRoutes(HttpServer& http, const ServerState& state, const HttpCounters& counters) {
  auto bind = [&state](auto handler) {
    return [&state, handler](const HttpRequest& request) { return handler(state, request); };
  };
  auto metrics = [&state, &counters](const HttpRequest& request) {
    return HandleMetrics(state, counters, request);
  };
  constexpr Access kPublic = Access::kPublic;
  constexpr Access kAuth = Access::kAuthenticated;
  // clang-format off
  http.Route("POST", "/v1/chat/completions", kAuth,   Guard(bind(HandleChatCompletions)));
  http.Route("POST", "/v1/completions",      kAuth,   Guard(bind(HandleCompletions)));
  http.Route("POST", "/v1/responses",        kAuth,   Guard(bind(HandleResponses)));
  http.Route("POST", "/v1/responses/input_tokens", kAuth, Guard(bind(HandleResponsesInputTokens)));
  http.Route("GET",  "/v1/responses/*",      kAuth,   Guard(bind(HandleStoredResponse)));
  http.Route("DELETE", "/v1/responses/*",    kAuth,   Guard(bind(HandleStoredResponse)));
  http.Route("POST", "/v1/responses/*",      kAuth,   Guard(bind(HandleStoredResponse)));
  http.Route("POST", "/v1/conversations",    kAuth,   Guard(bind(HandleConversations)));
  http.Route("GET",  "/v1/conversations/*",  kAuth,   Guard(bind(HandleConversation)));
  http.Route("POST", "/v1/conversations/*",  kAuth,   Guard(bind(HandleConversation)));
  http.Route("DELETE", "/v1/conversations/*", kAuth,  Guard(bind(HandleConversation)));
  http.Route("GET",  "/v1/models",           kAuth,   Guard(bind(HandleModels)));
  http.Route("GET",  "/v1/models/*",         kAuth,   Guard(bind(HandleModel)));
  http.Route("POST", "/tokenize",            kAuth,   Guard(bind(HandleTokenize)));
  http.Route("POST", "/detokenize",          kAuth,   Guard(bind(HandleDetokenize)));
  http.Route("GET",  "/health",              kPublic, Guard(bind(HandleHealth)));
  http.Route("GET",  "/metrics",             kPublic, Guard(metrics));
  // clang-format on
}

}  // namespace mkserve::server
