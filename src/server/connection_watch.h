// What a handler can learn about its connection while it waits on the engine: whether the client
// has hung up, and whether the server wants the request ended now (a shutdown whose drain timeout
// has passed). The HTTP layer builds one per request from the connection's socket; calling it is
// cheap (one poll), and it is safe to copy into a stream generator.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <type_traits>

namespace mkserve::server {

class ConnectionWatch {
 public:
  // A connection that never closes and a server that never stops (requests made in tests).
  ConnectionWatch() = default;
  // `is_peer_closed` polls the socket; `stop_requested` is the server's shutdown flag (may be
  // null: never).
  ConnectionWatch(std::function<bool()> is_peer_closed,
                  std::shared_ptr<const std::atomic<bool>> stop_requested = nullptr)
      : is_peer_closed_(std::move(is_peer_closed)), stop_requested_(std::move(stop_requested)) {}
  // A plain hang-up check, without a server behind it.
  template <typename Check>
  requires std::is_invocable_r_v<bool, Check> ConnectionWatch(Check check)
      : is_peer_closed_(std::move(check)) {}

  // The same server behind it, no connection: for work that outlives its request (a background
  // response), `cancelled` standing in for the hang-up.
  ConnectionWatch Detached(std::function<bool()> cancelled) const {
    return ConnectionWatch(std::move(cancelled), stop_requested_);
  }

  // True once the client has closed or reset the connection. Never blocks.
  bool operator()() const { return is_peer_closed_ && is_peer_closed_(); }
  // True once the server is shutting down and its drain timeout has passed.
  bool stop_requested() const {
    return stop_requested_ && stop_requested_->load(std::memory_order_acquire);
  }

 private:
  std::function<bool()> is_peer_closed_;
  std::shared_ptr<const std::atomic<bool>> stop_requested_;
};

// Watches a duplicate of `socket_fd` (closed with the last copy of the watch), so that the I/O
// thread may close or reuse the original while a handler still polls. Without a duplicate (out
// of file descriptors) hang-ups are found by failed writes only.
ConnectionWatch WatchSocket(int socket_fd, std::shared_ptr<const std::atomic<bool>> stop_requested);

}  // namespace mkserve::server
