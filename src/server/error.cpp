#include "server/error.h"

#include "server/json.h"

namespace mkserve::server {

ErrorStatus StatusOf(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidRequest:
      return {400, "invalid_request_error"};
    case ErrorKind::kUnauthorized:
      return {401, "authentication_error"};
    case ErrorKind::kNotFound:
      return {404, "not_found_error"};
    case ErrorKind::kMethodNotAllowed:
      return {405, "invalid_request_error"};
    case ErrorKind::kRequestTimeout:
      return {408, "invalid_request_error"};
    case ErrorKind::kPayloadTooLarge:
      return {413, "invalid_request_error"};
    case ErrorKind::kUnavailable:
      return {503, "unavailable_error"};
    case ErrorKind::kInternal:
      return {500, "server_error"};
  }
  return {500, "server_error"};
}

namespace {

// OpenAI's machine-readable `code` for the kinds where it defines one.
Json CodeOf(const ApiError& error) {
  switch (error.kind()) {
    case ErrorKind::kUnauthorized:
      return "invalid_api_key";
    case ErrorKind::kNotFound:
      return error.param() == "model" ? Json("model_not_found") : nullptr;
    case ErrorKind::kPayloadTooLarge:
      return "request_too_large";
    case ErrorKind::kRequestTimeout:
      return "request_timeout";
    case ErrorKind::kMethodNotAllowed:
      return "method_not_allowed";
    case ErrorKind::kInvalidRequest:
      return error.param().empty() ? Json(nullptr) : Json("invalid_value");
    default:
      return nullptr;
  }
}

}  // namespace

std::string ErrorBody(const ApiError& error) {
  Json body = {{"error",
                {{"message", error.message()},
                 {"type", StatusOf(error.kind()).openai_type},
                 {"param", error.param().empty() ? Json(nullptr) : Json(error.param())},
                 {"code", CodeOf(error)}}}};
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

HttpResponse ErrorResponse(const ApiError& error) {
  return JsonResponse(ErrorBody(error), StatusOf(error.kind()).http_status);
}

}  // namespace mkserve::server
