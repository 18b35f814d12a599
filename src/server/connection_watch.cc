#include "server/connection_watch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace dscale::server {
namespace {

// The numeric host and port of a socket name, written as cpp-httplib writes them.
bool Describe(const sockaddr_storage& addr, socklen_t len, std::string* host, int* port) {
  if (addr.ss_family == AF_INET) {
    *port = ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  } else if (addr.ss_family == AF_INET6) {
    *port = ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  } else {
    return false;
  }
  char buf[NI_MAXHOST] = {};
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, buf, sizeof(buf), nullptr, 0,
                  NI_NUMERICHOST) != 0) {
    return false;
  }
  *host = buf;
  return true;
}

bool LocalMatches(int fd, const ConnectionAddress& want) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  std::string host;
  int port = -1;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  return Describe(addr, len, &host, &port) && port == want.local_port && host == want.local_addr;
}

enum class Match { kNo, kYes, kPeerless };

Match Compare(int fd, const ConnectionAddress& want) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    // ENOTCONN: a socket that had a peer and lost it (or never had one, like a listener; those
    // never share an accepted connection's local address and port).
    return errno == ENOTCONN && LocalMatches(fd, want) ? Match::kPeerless : Match::kNo;
  }
  std::string host;
  int port = -1;
  if (!Describe(addr, len, &host, &port) || port != want.remote_port || host != want.remote_addr) {
    return Match::kNo;
  }
  return LocalMatches(fd, want) ? Match::kYes : Match::kNo;
}

}  // namespace

SocketSearch SearchConnectionSocket(const ConnectionAddress& address) {
  SocketSearch found;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return found;
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    const Match match = Compare(static_cast<int>(fd), address);
    if (match == Match::kPeerless) found.peerless_local_socket = true;
    if (match == Match::kYes) {
      found.fd = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  return found;
}

int FindConnectionSocket(const ConnectionAddress& address) {
  return SearchConnectionSocket(address).fd;
}

ConnectionWatch::ConnectionWatch(ConnectionAddress address) : address_(std::move(address)) {
  const SocketSearch search = SearchConnectionSocket(address_);
  fd_ = search.fd;
  peerless_socket_seen_ = search.peerless_local_socket;
}

bool ConnectionWatch::PeerClosed() {
  if (fd_ < 0) {
    // Not found (yet): search again, and count a socket that lost its peer as ours.
    const SocketSearch search = SearchConnectionSocket(address_);
    fd_ = search.fd;
    peerless_socket_seen_ = search.peerless_local_socket;
    if (fd_ < 0) return peerless_socket_seen_;
  }
  // POLLRDHUP: the peer closed (or shut down its side of) the connection, even when it sent
  // bytes first that nobody has read. Bytes alone (a pipelined request) are not a disconnect.
  pollfd p{.fd = fd_, .events = POLLIN | POLLRDHUP, .revents = 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace dscale::server
