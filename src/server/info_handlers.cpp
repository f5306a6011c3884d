// GET /v1/models, /health and /metrics.
#include "server/error.h"
#include "server/handlers.h"
#include "server/sse.h"

namespace mkserve::server {

HttpResponse HandleModels(const ServerState& state, const HttpRequest&) {
  Json model = {{"id", state.options().model_id},
                {"object", "model"},
                {"created", state.options().created_unix_s},
                {"owned_by", "mkserve"}};
  if (state.is_ready()) model["max_model_len"] = state.RequireModel().engine->max_model_len();
  return JsonResponse(DumpJson({{"object", "list"}, {"data", Json::array({model})}}));
}

HttpResponse HandleHealth(const ServerState& state, const HttpRequest&) {
  if (!state.is_ready()) {
    throw ApiError(ErrorKind::kUnavailable, "the model is still loading");
  }
  if (std::optional<std::string> fatal = state.RequireModel().engine->fatal_error()) {
    throw ApiError(ErrorKind::kUnavailable,
                   "the backend failed and the server is exiting to be restarted: " + *fatal);
  }
  return JsonResponse("{\"status\":\"ok\"}");
}

HttpResponse HandleMetrics(const ServerState& state, const HttpCounters& counters,
                           const HttpRequest&) {
  EngineSnapshot snapshot;
  if (state.is_ready()) snapshot = state.RequireModel().engine->Snapshot();
  return TextResponse(RenderMetrics(snapshot, counters.Counts()),
                      "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace mkserve::server
