#include "server/http_server.h"

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdio>
#include <fstream>
#include <vector>

#include "common/error.h"
#include "server/http_connection.h"

namespace mkserve::server {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// A burst of connects (a benchmark starting 64 streams at once, clients reconnecting after a
// restart) must fit in the accept queue: an overflow drops SYNs, and the client retries only
// after a second. The kernel caps the backlog at net.core.somaxconn.
constexpr int kMinListenBacklog = 1024;
// Requests still running this long after a stop was requested are cut off by closing their
// sockets.
constexpr std::chrono::seconds kStopGrace(10);

int SomaxConn() {
  std::ifstream file("/proc/sys/net/core/somaxconn");
  int value = 0;
  return file >> value ? value : 0;
}

int ListenBacklog(int max_connections) {
  int wanted = std::max(kMinListenBacklog, max_connections);
  int cap = SomaxConn();
  if (cap > 0 && cap < wanted) {
    std::fprintf(stderr,
                 "mkserve serve: net.core.somaxconn is %d, below the listen backlog %d: bursts "
                 "of connects beyond it wait for SYN retries (raise it with sysctl)\n",
                 cap, wanted);
  }
  return wanted;
}

}  // namespace

class HttpServer::Impl {
 public:
  explicit Impl(HttpOptions options) : options_(std::move(options)), router_(options_.api_key) {
    context_.router = &router_;
    context_.limits = {options_.max_body_bytes, options_.header_timeout, options_.body_timeout};
    context_.on_response = options_.on_response;
  }

  void Route(const std::string& method, const std::string& path, Access access, Handler handler) {
    router_.Add(method, path, access, std::move(handler));
  }

  int Bind() {
    boost::system::error_code error;
    tcp::resolver resolver(io_);
    auto endpoints = resolver.resolve(options_.host, std::to_string(options_.port),
                                      tcp::resolver::passive, error);
    if (!error && endpoints.empty()) error = asio::error::host_not_found;
    tcp::endpoint endpoint;
    if (!error) endpoint = *endpoints.begin();
    if (!error) acceptor_.open(endpoint.protocol(), error);
    if (!error) acceptor_.set_option(tcp::acceptor::reuse_address(true), error);
    if (!error) acceptor_.bind(endpoint, error);
    if (!error) acceptor_.listen(ListenBacklog(options_.max_connections), error);
    if (error) {
      throw Error("cannot listen on " + options_.host + ":" + std::to_string(options_.port) + " (" +
                  error.message() + "); pick another --host/--port");
    }
    return acceptor_.local_endpoint().port();
  }

  void Listen() {
    Accept();
    io_.run();
  }

  void Shutdown(std::chrono::milliseconds drain_timeout) {
    if (shutting_down_.exchange(true)) return;
    context_.draining = true;
    asio::post(io_, [this] {
      boost::system::error_code ignored;
      acceptor_.close(ignored);
      ForEachConnection([](HttpConnection& connection) { connection.CloseUnlessHandling(); });
    });
    if (!context_.running.WaitFor(drain_timeout)) {
      context_.stop_requested->store(true, std::memory_order_release);
      context_.running.WaitFor(kStopGrace);
    }
    asio::post(
        io_, [this] { ForEachConnection([](HttpConnection& connection) { connection.Close(); }); });
    context_.running.Wait();
    io_.stop();
  }

 private:
  void Accept() {
    acceptor_.async_accept([this](boost::system::error_code error, tcp::socket socket) {
      if (!acceptor_.is_open()) return;
      if (error) {
        // Out of file descriptors, most likely: wait a little instead of spinning.
        retry_timer_.expires_after(std::chrono::milliseconds(50));
        retry_timer_.async_wait([this](boost::system::error_code) { Accept(); });
        return;
      }
      auto connection = std::make_shared<HttpConnection>(std::move(socket), context_);
      std::erase_if(connections_, [](const auto& weak) { return weak.expired(); });
      connections_.push_back(connection);
      if (context_.open_connections > options_.max_connections) {
        connection->Refuse(options_.max_connections);
      } else {
        connection->Start();
      }
      Accept();
    });
  }

  template <typename Action>
  void ForEachConnection(Action action) {
    for (const auto& weak : connections_) {
      if (auto connection = weak.lock()) action(*connection);
    }
  }

  HttpOptions options_;
  HttpRouter router_;
  ConnectionContext context_;  // before io_: the connections its queue still holds use it
  std::atomic<bool> shutting_down_{false};
  asio::io_context io_{1};
  // Keeps Listen running while handlers work with no I/O pending (after the acceptor closed).
  asio::executor_work_guard<asio::io_context::executor_type> keep_running_ =
      asio::make_work_guard(io_);
  tcp::acceptor acceptor_{io_};
  asio::steady_timer retry_timer_{io_};
  std::vector<std::weak_ptr<HttpConnection>> connections_;  // I/O thread only
};

HttpServer::HttpServer(HttpOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
HttpServer::~HttpServer() = default;

void HttpServer::Route(const std::string& method, const std::string& path, Access access,
                       Handler handler) {
  impl_->Route(method, path, access, std::move(handler));
}
int HttpServer::Bind() { return impl_->Bind(); }
void HttpServer::Listen() { impl_->Listen(); }
void HttpServer::Shutdown(std::chrono::milliseconds drain_timeout) {
  impl_->Shutdown(drain_timeout);
}

}  // namespace mkserve::server
