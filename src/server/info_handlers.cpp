// GET /v1/models, /v1/models/ID, /health and /metrics.
#include <string>
#include <string_view>

#include "server/error.h"
#include "server/handlers.h"
#include "server/sse.h"

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

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX escapes decoded (the openai SDKs escape an id's slash as %2F); anything else kept as is.
std::string PercentDecoded(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && HexDigit(text[i + 1]) >= 0 &&
        HexDigit(text[i + 2]) >= 0) {
      out += static_cast<char>(HexDigit(text[i + 1]) * 16 + HexDigit(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
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
  return TextResponse(RenderMetrics(snapshot, counters.Counts()),
                      "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace mkserve::server
