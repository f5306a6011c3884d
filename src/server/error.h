// Errors of the HTTP API. One ErrorKind enum, one function mapping it to an HTTP status and an
// OpenAI error type, and one exception (ApiError) that request parsing throws and the route table
// wrapper turns into a response. Handlers never let anything else escape.
#pragma once

#include <stdexcept>
#include <string>

#include "server/http_types.h"

namespace mkserve::server {

enum class ErrorKind {
  kInvalidRequest,    // 400: malformed JSON, wrong type, value out of range
  kUnauthorized,      // 401: missing or wrong API key
  kNotFound,          // 404: unknown route or model
  kMethodNotAllowed,  // 405: a known path asked with another method
  kRequestTimeout,    // 408: a request head or body that stopped arriving
  kPayloadTooLarge,   // 413: body over --max-body-bytes
  kUnavailable,       // 503: still loading, or the queue is full
  kInternal,          // 500: a bug on our side
};

struct ErrorStatus {
  int http_status;
  const char* openai_type;
};

// The single mapping from ErrorKind to HTTP status and OpenAI `error.type`.
ErrorStatus StatusOf(ErrorKind kind);

class ApiError : public std::runtime_error {
 public:
  ApiError(ErrorKind kind, const std::string& message, std::string param = "")
      : std::runtime_error(message), kind_(kind), message_(message), param_(std::move(param)) {}

  ErrorKind kind() const { return kind_; }
  // The whole message: what() ends at a NUL, which a client's id can carry ("/v1/responses/%00").
  const std::string& message() const { return message_; }
  // The request field that was wrong ("messages[1].role"), empty when none applies.
  const std::string& param() const { return param_; }

 private:
  ErrorKind kind_;
  std::string message_;
  std::string param_;
};

// {"error": {"message", "type", "param", "code"}} as OpenAI sends it; param is null when empty.
std::string ErrorBody(const ApiError& error);
// That body with the kind's HTTP status.
HttpResponse ErrorResponse(const ApiError& error);

}  // namespace mkserve::server
