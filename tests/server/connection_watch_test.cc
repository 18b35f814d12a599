// Finding a connection's socket by its addresses and noticing when the peer has gone.

#include "server/connection_watch.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace dscale::server {
namespace {

int Port(int fd, bool peer) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  const int r = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                     : getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  EXPECT_EQ(r, 0);
  return ntohs(addr.sin_port);
}

// A connected pair on loopback: the server side (as accept() returns it) and the client side.
struct Pair {
  int server = -1;
  int client = -1;
  Pair() {
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(listener, 1), 0);
    addr.sin_port = htons(static_cast<uint16_t>(Port(listener, false)));
    client = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    server = accept(listener, nullptr, nullptr);
    close(listener);
  }
  ~Pair() {
    if (server >= 0) close(server);
    if (client >= 0) close(client);
  }
  ConnectionAddress ServerSide() const {
    return {.local_addr = "127.0.0.1",
            .local_port = Port(server, false),
            .remote_addr = "127.0.0.1",
            .remote_port = Port(server, true)};
  }
};

TEST(ConnectionWatchTest, FindsTheServerSideSocket) {
  Pair pair;
  ASSERT_GE(pair.server, 0);
  EXPECT_EQ(FindConnectionSocket(pair.ServerSide()), pair.server);
  ConnectionAddress unknown = pair.ServerSide();
  unknown.remote_port = 1;
  EXPECT_EQ(FindConnectionSocket(unknown), -1);
}

TEST(ConnectionWatchTest, NoticesThePeerClosing) {
  Pair pair;
  ConnectionWatch watch(pair.ServerSide());
  EXPECT_FALSE(watch.PeerClosed());
  ASSERT_EQ(send(pair.client, "x", 1, 0), 1);  // a pipelined byte is not a disconnect
  EXPECT_FALSE(watch.PeerClosed());
  close(pair.client);
  pair.client = -1;
  EXPECT_TRUE(watch.PeerClosed());
}

// A reset (SO_LINGER 0) before the watch exists leaves the server side without a peer address;
// the watch still sees the client gone.
TEST(ConnectionWatchTest, NoticesAResetBeforeItStarted) {
  Pair pair;
  const ConnectionAddress address = pair.ServerSide();
  const linger reset{.l_onoff = 1, .l_linger = 0};
  ASSERT_EQ(setsockopt(pair.client, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset)), 0);
  close(pair.client);
  pair.client = -1;
  usleep(20000);  // the RST crosses loopback
  EXPECT_EQ(FindConnectionSocket(address), -1);
  EXPECT_TRUE(SearchConnectionSocket(address).peerless_local_socket);
  ConnectionWatch watch(address);
  EXPECT_TRUE(watch.PeerClosed());
}

TEST(ConnectionWatchTest, NoticesAResetAfterItStarted) {
  Pair pair;
  ConnectionWatch watch(pair.ServerSide());
  EXPECT_FALSE(watch.PeerClosed());
  const linger reset{.l_onoff = 1, .l_linger = 0};
  ASSERT_EQ(setsockopt(pair.client, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset)), 0);
  close(pair.client);
  pair.client = -1;
  usleep(20000);
  EXPECT_TRUE(watch.PeerClosed());
}

// A peerless socket on another local address is not this connection's.
TEST(ConnectionWatchTest, APeerlessSocketElsewhereIsNotOurs) {
  Pair pair;
  ConnectionAddress address = pair.ServerSide();
  const linger reset{.l_onoff = 1, .l_linger = 0};
  ASSERT_EQ(setsockopt(pair.client, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset)), 0);
  close(pair.client);
  pair.client = -1;
  usleep(20000);
  address.local_port = 1;
  ConnectionWatch watch(address);
  EXPECT_FALSE(watch.PeerClosed());
}

TEST(ConnectionWatchTest, UnknownConnectionIsNeverClosed) {
  ConnectionWatch watch(
      {.local_addr = "127.0.0.1", .local_port = 1, .remote_addr = "127.0.0.1", .remote_port = 2});
  EXPECT_FALSE(watch.PeerClosed());
}

}  // namespace
}  // namespace dscale::server
