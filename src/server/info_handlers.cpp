// GET /v1/models, /v1/models/ID, /health and /metrics.
#include <string>
#include <string_view>

#include "server/error.h"
#include "server/handlers.h"
#include "server/sse.h"
#include "server/url_query.h"

namespace mkserve::server {

namespace {

Json ModelObject(const ServerState& state) {
  Json model = {{"id", state.options().model_id},
                {"object", "model"},
                {"created", state.options().created_unix_s},
                {"owned_by", "mkserve"}};
  if (state.is_ready()) model["max_model_len"] = state.RequireModel().engine->max_model_len();
  return model;
}

}  // namespace

HttpResponse HandleModels(const ServerState& state, const HttpRequest&) {
  return JsonResponse(DumpJson({{"object", "list"}, {"data", Json::array({ModelObject(state)})}}));
}

HttpResponse HandleModel(const ServerState& state, const HttpRequest& request) {
  constexpr std::string_view kPrefix = "/v1/models/";
  // The router routes only paths longer than the prefix, so the id is never empty (which
  // CheckModelName would take for "the served model").
  state.CheckModelName(PercentDecoded(request.path.substr(kPrefix.size())));
  return JsonResponse(DumpJson(ModelObject(state)));
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
  const ResponseStore& store = state.responses();
  return TextResponse(
      RenderMetrics(snapshot, counters.Counts()) +
          RenderResponseStore(static_cast<int64_t>(store.size()), store.bytes(), store.max_bytes(),
                              static_cast<int64_t>(state.background().running())),
      "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace mkserve::server
