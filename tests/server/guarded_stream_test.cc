// The stream a request's body is read from: the head first, then at most max_body_bytes of body
// within its deadlines, saying which limit a failed read hit; unread bytes stay for the next
// request.

#include "server/guarded_stream.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace dscale::server {
namespace {

using namespace std::chrono_literals;

// A connected pair of non-blocking sockets: [0] the server's, [1] the client's.
struct SocketPair {
  SocketPair() {
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  }
  ~SocketPair() {
    close(fds[0]);
    close(fds[1]);
  }
  void Send(const std::string& bytes) const {
    ASSERT_EQ(send(fds[1], bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  int fds[2] = {-1, -1};
};

// Reads until `n` bytes, a failure or the end; what was read.
std::string ReadUpTo(GuardedStream& stream, size_t n) {
  std::string out;
  char buf[4096];
  while (out.size() < n) {
    const ssize_t got = stream.read(buf, std::min(sizeof(buf), n - out.size()));
    if (got <= 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  return out;
}

TEST(GuardedStreamTest, ServesTheHeadThenTheBodyAndKeepsWhatFollows) {
  SocketPair pair;
  const ConnectionLimits limits{.max_body_bytes = 100};
  GuardedStream stream(pair.fds[0], {.remote_addr = "1.2.3.4", .remote_port = 9}, limits, "HEAD",
                       "body-");
  EXPECT_EQ(GuardedStream::Current(), &stream);
  pair.Send("rest|next request");
  EXPECT_EQ(ReadUpTo(stream, 4), "HEAD");
  EXPECT_EQ(ReadUpTo(stream, 9), "body-rest");
  std::this_thread::sleep_for(20ms);  // let the bytes after the body arrive whole
  EXPECT_EQ(ReadUpTo(stream, 1), "|");
  EXPECT_EQ(stream.TakeUnread(), "next request");
  EXPECT_TRUE(stream.reusable());
  std::string ip;
  int port = 0;
  stream.get_remote_ip_and_port(ip, port);
  EXPECT_EQ(ip, "1.2.3.4");
  EXPECT_EQ(port, 9);
}

TEST(GuardedStreamTest, AReadPastTheBodyLimitFailsAsTooLarge) {
  SocketPair pair;
  const ConnectionLimits limits{.max_body_bytes = 1000};
  GuardedStream stream(pair.fds[0], {}, limits, "", std::string(600, 'a'));
  pair.Send(std::string(2000, 'b'));
  EXPECT_EQ(ReadUpTo(stream, 5000).size(), 1000u);
  EXPECT_EQ(stream.fault(), GuardedStream::BodyFault::kTooLarge);
  EXPECT_FALSE(stream.reusable());
}

TEST(GuardedStreamTest, ABodyThatStallsTimesOut) {
  SocketPair pair;
  const ConnectionLimits limits{.body_timeout = 5s, .body_stall_timeout = 200ms};
  GuardedStream stream(pair.fds[0], {}, limits, "", "");
  pair.Send("abc");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ReadUpTo(stream, 10), "abc");
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(stream.fault(), GuardedStream::BodyFault::kTimedOut);
  EXPECT_GE(waited, 150ms);
  EXPECT_LT(waited, 2s);
}

TEST(GuardedStreamTest, ABodyTrickledPastItsDeadlineTimesOut) {
  SocketPair pair;
  const ConnectionLimits limits{.body_timeout = 300ms, .body_stall_timeout = 5s};
  GuardedStream stream(pair.fds[0], {}, limits, "", "");
  std::thread trickle([&] {
    for (int i = 0; i < 20; ++i) {
      if (send(pair.fds[1], "x", 1, MSG_NOSIGNAL) != 1) break;
      std::this_thread::sleep_for(50ms);
    }
  });
  const auto start = std::chrono::steady_clock::now();
  const std::string got = ReadUpTo(stream, 100);
  const auto waited = std::chrono::steady_clock::now() - start;
  trickle.join();
  EXPECT_EQ(stream.fault(), GuardedStream::BodyFault::kTimedOut);
  EXPECT_LT(got.size(), 20u);
  EXPECT_LT(waited, 900ms);
}

TEST(GuardedStreamTest, AClientThatLeavesMidBodyIsAReadFailure) {
  SocketPair pair;
  GuardedStream stream(pair.fds[0], {}, ConnectionLimits{}, "", "");
  pair.Send("ab");
  shutdown(pair.fds[1], SHUT_WR);
  EXPECT_EQ(ReadUpTo(stream, 10), "ab");
  EXPECT_EQ(stream.fault(), GuardedStream::BodyFault::kReadFailed);
}

TEST(GuardedStreamTest, WritesWholeBuffersAndCurrentIsPerThread) {
  SocketPair pair;
  GuardedStream stream(pair.fds[0], {}, ConnectionLimits{}, "", "");
  const std::string big(300000, 'z');  // more than a socket buffer: the reader drains it
  std::string received;
  std::thread reader([&] {
    char buf[65536];
    while (received.size() < big.size()) {
      const ssize_t n = recv(pair.fds[1], buf, sizeof(buf), 0);
      if (n <= 0) break;
      received.append(buf, static_cast<size_t>(n));
    }
  });
  EXPECT_EQ(stream.write(big.data(), big.size()), static_cast<ssize_t>(big.size()));
  reader.join();
  EXPECT_EQ(received, big);
  GuardedStream* elsewhere = &stream;
  std::thread([&] { elsewhere = GuardedStream::Current(); }).join();
  EXPECT_EQ(elsewhere, nullptr);
}

}  // namespace
}  // namespace dscale::server
