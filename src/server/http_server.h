// The HTTP layer: cpp-httplib behind a pimpl. It owns the thread pool, the body size limit
// (413), CORS (preflight answered without auth) and the Bearer API key check (401). Routes that
// are not registered answer 404 in OpenAI error shape.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "server/http_types.h"

namespace mkserve::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;      // 0 picks a free port; BoundPort() tells which
  std::string api_key;  // empty: no auth
  int64_t max_body_bytes = 16 << 20;
  int num_threads = 128;  // each open stream holds one while it runs
};

enum class Access { kPublic, kAuthenticated };

class HttpServer {
 public:
  explicit HttpServer(HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Registers a handler; call before Bind. `handler` must not throw (see routes.cpp).
  void Route(const std::string& method, const std::string& path, Access access, Handler handler);

  // Binds the socket; throws mkserve::Error when the address is taken. Returns the bound port.
  int Bind();
  // Serves until Stop(); blocks the calling thread.
  void Listen();
  void Stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mkserve::server
