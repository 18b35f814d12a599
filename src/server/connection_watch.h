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
//
// A client that resets the connection before the watch has found its socket leaves a socket
// without a peer address (getpeername fails with ENOTCONN), which the address search cannot
// match. Since the request's own socket is certainly open, "no connected socket has our
// addresses, and one of ours on the same local address has lost its peer" means ours is that
// one: the client is gone.

#include <string>
#include <utility>

namespace dscale::server {

struct ConnectionAddress {
  std::string local_addr;
  int local_port = -1;
  std::string remote_addr;
  int remote_port = -1;
};

class ConnectionWatch {
 public:
  // Looks for the socket at once, while the client is most likely still connected.
  explicit ConnectionWatch(ConnectionAddress address);
  // Watches `fd`, the request's own socket, when the caller knows it (no search).
  ConnectionWatch(ConnectionAddress address, int fd) : address_(std::move(address)), fd_(fd) {}

  // True once the client has closed or reset the connection. False while it is open, or when
  // the socket cannot be found and no socket of this server's address has lost its peer.
  bool PeerClosed();

 private:
  ConnectionAddress address_;
  int fd_ = -1;
  bool peerless_socket_seen_ = false;  // the last search found a socket that lost its peer
};

struct SocketSearch {
  int fd = -1;  // this process's TCP socket with the addresses, or -1
  // Whether some socket with the local address has no peer any more (ENOTCONN): reset or
  // disconnected before the search.
  bool peerless_local_socket = false;
};
SocketSearch SearchConnectionSocket(const ConnectionAddress& address);

// SearchConnectionSocket(address).fd.
int FindConnectionSocket(const ConnectionAddress& address);

}  // namespace dscale::server
