// One client connection of the HTTP server. The I/O thread reads each request (head, then body)
// under deadlines, so a slow or idle client holds a socket and a buffer but no thread; a complete
// request runs its handler on a thread of its own, which writes the response through the I/O
// thread and waits for each write. Keep-alive connections loop back to reading the next head.
#pragma once

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "server/http_router.h"

namespace mkserve::server {

// Counts the requests whose handler runs; shutdown waits on it.
class RunningRequests {
 public:
  void Begin();
  void End();
  // True once none runs, false when `timeout` passed first.
  bool WaitFor(std::chrono::milliseconds timeout);
  void Wait();

 private:
  std::mutex mutex_;
  std::condition_variable none_;
  int count_ = 0;
};

struct ConnectionLimits {
  int64_t max_body_bytes = 0;
  std::chrono::milliseconds header_timeout{0};  // to the end of the request head
  std::chrono::milliseconds body_timeout{0};    // from there to the end of the body
};

// What the connections of one server share. Owned by the server; outlives its connections.
struct ConnectionContext {
  const HttpRouter* router = nullptr;
  ConnectionLimits limits;
  // Set when the drain timeout of a shutdown has passed: running requests end now.
  std::shared_ptr<std::atomic<bool>> stop_requested = std::make_shared<std::atomic<bool>>(false);
  // Set when a shutdown begins: no new requests are read.
  std::atomic<bool> draining{false};
  std::atomic<int> open_connections{0};
  std::function<void(int status)> on_response;  // HttpOptions::on_response
  RunningRequests running;
};

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  HttpConnection(boost::asio::ip::tcp::socket socket, ConnectionContext& context);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // The rest run on the I/O thread.
  void Start();
  // Answers 503 (the server is at its connection limit) and closes.
  void Refuse(int max_connections);
  // Closes the connection unless a handler is running for it (shutdown: idle and half-read
  // connections go at once, running requests may finish).
  void CloseUnlessHandling();
  void Close();

 private:
  enum class Phase { kReading, kHandling, kClosed };

  void ReadHead();
  // The head's or the body's deadline: when it passes, the read is cancelled (the socket stays
  // open) so OnRead can answer 408 to a request that stopped arriving.
  void ArmReadDeadline(std::chrono::milliseconds timeout);
  void EndReadDeadline();  // the read ended (or the connection): a pending deadline is stale
  void OnHead(boost::beast::error_code error);
  void ReadBody();
  void OnRead(boost::beast::error_code error);
  void Dispatch();
  // Answers a request that could not be read, then closes.
  void AnswerAndClose(HttpResponse response);
  // Stops sending, then reads (and drops) what the client still sends for a moment before
  // closing, so an error answer is not lost to a reset while the client is mid-upload.
  void LingerAndClose();
  void DropInputUntilClosed();

  // On the request's own thread.
  static void Handle(std::shared_ptr<HttpConnection> self, HttpRequest request);
  bool WriteWhole(const HttpResponse& response, bool keep_alive);
  bool WriteStream(HttpResponse& response, bool keep_alive);
  // Runs `start_write(done)` (an asynchronous write) on the I/O thread and waits for it; false when
  // it failed: the client left, or did not read for the write timeout.
  template <typename AsyncWrite>
  bool WriteOnIoThread(AsyncWrite start_write);

  boost::beast::tcp_stream stream_;
  boost::asio::steady_timer read_deadline_;
  bool read_timed_out_ = false;
  uint64_t read_generation_ = 0;  // ArmReadDeadline's handler acts only on its own read
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  ConnectionContext& context_;
  Phase phase_ = Phase::kReading;
  unsigned version_ = 11;  // of the request being handled
  bool keep_alive_ = true;
  bool head_only_ = false;  // a HEAD request: the GET answer's head, no body
};

}  // namespace mkserve::server
