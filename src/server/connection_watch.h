// Notices a client hang-up while a handler waits on the engine. cpp-httplib 0.11 does not expose
// the connection's socket, so we find it once by its address pair and then poll it for RDHUP.
#pragma once

#include <string>

namespace mkserve::server {

struct ConnectionAddress {
  std::string local_addr;
  int local_port = -1;
  std::string remote_addr;
  int remote_port = -1;
};

// The socket of this process connected from `address`, or -1 when none matches.
int FindConnectionSocket(const ConnectionAddress& address);

// True when the peer of `socket_fd` has closed or reset the connection. Never blocks.
bool IsPeerClosed(int socket_fd);

}  // namespace mkserve::server
