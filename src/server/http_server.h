// The HTTP layer: an event-driven HTTP/1.1 server (Boost.Beast on Asio) behind a pimpl. One I/O
// thread accepts and reads every connection under deadlines, so slow or idle clients hold no
// thread; each complete request runs its handler on a thread of its own (http_connection.h). It
// owns the listen backlog, the connection limit (503), the body size limit (413), the route table
// with CORS and the API key (http_router.h), and the graceful shutdown.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "server/http_router.h"
#include "server/http_types.h"

namespace mkserve::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;      // 0 picks a free port; Bind() tells which
  std::string api_key;  // empty: no auth
  int64_t max_body_bytes = 16 << 20;
  // Open connections at most; the next one is answered 503 and closed. The listen backlog is
  // sized from it too, so a burst of connects is queued, not dropped.
  int max_connections = 1024;
  // From a connection's start (or the end of its previous response) to the end of the request
  // head, and from there to the end of the body. Past either the connection is closed.
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds body_timeout{60'000};
  // Called with the status of every response the server starts, the ones the HTTP layer sends
  // itself (413, 431, 503 at the connection cap, malformed requests) included; from any thread.
  std::function<void(int status)> on_response;
};

class HttpServer {
 public:
  explicit HttpServer(HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Registers a handler; call before Bind. `handler` must not throw (see routes.cpp).
  void Route(const std::string& method, const std::string& path, Access access, Handler handler);

  // Binds and listens; throws mkserve::Error when the address is taken. Returns the bound port.
  // Connections are queued from here on and served once Listen runs.
  int Bind();
  // Serves until a shutdown has finished; blocks the calling thread.
  void Listen();
  // From another thread: stops accepting and closes connections between requests, lets running
  // requests finish for up to `drain_timeout`, then ends the rest (streams with finish reason
  // "abort" and [DONE], others with 503), closes everything and makes Listen return. Blocks
  // until then.
  void Shutdown(std::chrono::milliseconds drain_timeout);
  // Shutdown without a drain.
  void Stop() { Shutdown(std::chrono::milliseconds(0)); }

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mkserve::server
