#pragma once
// Tells whether the client of a request has gone, so that a request whose client disconnected
// is cancelled and its KV freed instead of running to the end.
//
// cpp-httplib 0.11 (Debian 12) does not expose a request's socket, and writing to a closed
// socket fails only on the second write after the peer has gone. The watch finds the socket
// by the connection's addresses (a live connection's address pair is unique), then polls it:
// the peer's end of stream (POLLRDHUP) or a reset means the client is gone. The socket stays open
// while the handler or its content provider runs, so the descriptor cannot be reused under the
// watch.

#include <string>

namespace dscale::server {

struct ConnectionAddress {
  std::string local_addr;
  int local_port = -1;
  std::string remote_addr;
  int remote_port = -1;
};

class ConnectionWatch {
 public:
  explicit ConnectionWatch(ConnectionAddress address) : address_(std::move(address)) {}

  // True once the client has closed or reset the connection. False while it is open or when
  // the socket cannot be found.
  bool PeerClosed();

 private:
  ConnectionAddress address_;
  int fd_ = -1;
  bool searched_ = false;
};

// The descriptor of this process's TCP socket with these addresses, or -1.
int FindConnectionSocket(const ConnectionAddress& address);

}  // namespace dscale::server
