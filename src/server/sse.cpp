#include "server/sse.h"

namespace mkserve::server {

std::string DumpJson(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string SseEvent(const Json& payload) { return "data: " + DumpJson(payload) + "\n\n"; }

std::string NamedSseEvent(const std::string& name, const Json& payload) {
  return "event: " + name + "\n" + SseEvent(payload);
}

}  // namespace mkserve::server
