#include "server/connection_watch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>

namespace mkserve::server {
namespace {

// Address and port of a socket end, as text ("127.0.0.1", 8000); false for non-IP sockets.
bool Describe(const sockaddr_storage& storage, std::string& addr, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (storage.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(storage);
    inet_ntop(AF_INET, &v4.sin_addr, text, sizeof(text));
    port = ntohs(v4.sin_port);
  } else if (storage.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(storage);
    inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof(text));
    port = ntohs(v6.sin6_port);
  } else {
    return false;
  }
  addr = text;
  return true;
}

bool Matches(int fd, const ConnectionAddress& address) {
  sockaddr_storage local{}, remote{};
  socklen_t local_len = sizeof(local), remote_len = sizeof(remote);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return false;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_len) != 0) return false;
  std::string local_addr, remote_addr;
  int local_port = -1, remote_port = -1;
  if (!Describe(local, local_addr, local_port) || !Describe(remote, remote_addr, remote_port)) {
    return false;
  }
  return local_port == address.local_port && remote_port == address.remote_port &&
         remote_addr == address.remote_addr;
}

}  // namespace

int FindConnectionSocket(const ConnectionAddress& address) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", error)) {
    int fd = std::atoi(entry.path().filename().c_str());
    struct stat info {};
    if (fstat(fd, &info) != 0 || !S_ISSOCK(info.st_mode)) continue;
    if (Matches(fd, address)) return fd;
  }
  return -1;
}

bool IsPeerClosed(int socket_fd) {
  if (socket_fd < 0) return false;
  pollfd entry{socket_fd, POLLRDHUP, 0};
  if (poll(&entry, 1, 0) <= 0) return false;
  return (entry.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace mkserve::server
