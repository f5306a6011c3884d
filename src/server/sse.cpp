#include "server/sse.h"

namespace mkserve::server {

std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string SseEvent(const nlohmann::json& payload) {
  return "data: " + DumpJson(payload) + "\n\n";
}

}  // namespace mkserve::server
