#include "server/generation_response.h"

namespace mkserve::server {

std::string SseErrorEvent(const ApiError& error) {
  Json body = Json::parse(ErrorBody(error));
  return SseEvent(body);
}

}  // namespace mkserve::server
