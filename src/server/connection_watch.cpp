#include "server/connection_watch.h"

#include <poll.h>
#include <unistd.h>

namespace mkserve::server {
namespace {

// True when the peer has closed or reset the connection. Never blocks.
bool IsPeerClosed(int socket_fd) {
  pollfd entry{socket_fd, POLLRDHUP, 0};
  if (poll(&entry, 1, 0) <= 0) return false;
  return (entry.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

class SocketDuplicate {
 public:
  explicit SocketDuplicate(int fd) : fd_(dup(fd)) {}
  ~SocketDuplicate() {
    if (fd_ >= 0) close(fd_);
  }
  SocketDuplicate(const SocketDuplicate&) = delete;
  SocketDuplicate& operator=(const SocketDuplicate&) = delete;
  bool IsPeerClosed() const { return fd_ >= 0 && server::IsPeerClosed(fd_); }

 private:
  int fd_;
};

}  // namespace

ConnectionWatch WatchSocket(int socket_fd,
                            std::shared_ptr<const std::atomic<bool>> stop_requested) {
  auto socket = std::make_shared<const SocketDuplicate>(socket_fd);
  return ConnectionWatch([socket] { return socket->IsPeerClosed(); }, std::move(stop_requested));
}

}  // namespace mkserve::server
