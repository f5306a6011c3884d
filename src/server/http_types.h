// Plain request/response structs of the HTTP layer. Handlers see only these; the HTTP library
// stays inside http_server.cpp.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "server/connection_watch.h"

namespace mkserve::server {

struct HttpRequest {
  std::string method;
  std::string path;
  std::string query;                           // the target after '?', still escaped
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  // Called, true once the client has hung up; stop_requested() once the server wants the request
  // ended (shutdown). Cheap (one poll); safe to copy into a stream generator.
  ConnectionWatch is_connection_closed;

  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// A pull generator for streamed bodies: fills `chunk` and returns true while more may follow;
// returns false at the end (chunk may still hold the last bytes). Its captured state is released
// when the connection ends, so an RAII request handle inside it cancels on disconnect.
using ChunkGenerator = std::function<bool(std::string& chunk)>;

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::map<std::string, std::string> headers;
  ChunkGenerator next;  // set: the body is streamed with chunked transfer encoding
};

inline HttpResponse TextResponse(std::string body, std::string content_type, int status = 200) {
  HttpResponse response;
  response.status = status;
  response.content_type = std::move(content_type);
  response.body = std::move(body);
  return response;
}

inline HttpResponse JsonResponse(std::string body, int status = 200) {
  return TextResponse(std::move(body), "application/json", status);
}

// Handlers must not throw; the route table wraps each one (see routes.cpp).
using Handler = std::function<HttpResponse(const HttpRequest&)>;

}  // namespace mkserve::server
