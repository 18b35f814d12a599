#include "server/guarded_stream.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace dscale::server {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr size_t kBodyReadChunk = 16u << 10;

thread_local GuardedStream* current_stream = nullptr;

// Milliseconds from now until `deadline`, at least 0.
int MillisUntil(SteadyClock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1'000'000));
}

bool WaitFor(int fd, short events, int timeout_ms) {
  pollfd p{.fd = fd, .events = events, .revents = 0};
  int r = 0;
  do {
    r = poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  return r > 0;
}

}  // namespace

GuardedStream::GuardedStream(int fd, const ConnectionAddress& address,
                             const ConnectionLimits& limits, std::string head, std::string rest)
    : fd_(fd),
      address_(address),
      limits_(limits),
      body_deadline_(SteadyClock::now() + limits.body_timeout),
      head_(std::move(head)),
      buffer_(std::move(rest)),
      previous_(current_stream) {
  current_stream = this;
}

GuardedStream::~GuardedStream() { current_stream = previous_; }

GuardedStream* GuardedStream::Current() { return current_stream; }

bool GuardedStream::is_readable() const {
  if (head_read_ < head_.size() || buffer_read_ < buffer_.size()) return true;
  return WaitFor(fd_, POLLIN, MillisUntil(body_deadline_));
}

bool GuardedStream::is_writable() const {
  if (!WaitFor(fd_, POLLOUT, static_cast<int>(limits_.write_timeout.count()))) return false;
  // Alive unless the peer has closed: readable with nothing to read.
  if (!WaitFor(fd_, POLLIN, 0)) return true;
  char byte;
  return recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

bool GuardedStream::Fill() {
  buffer_.erase(0, buffer_read_);
  buffer_read_ = 0;
  const size_t had = buffer_.size();
  const auto deadline = std::min(body_deadline_, SteadyClock::now() + limits_.body_stall_timeout);
  while (true) {
    if (!WaitFor(fd_, POLLIN, MillisUntil(deadline))) {
      fault_ = BodyFault::kTimedOut;
      return false;
    }
    buffer_.resize(had + kBodyReadChunk);
    const ssize_t n = recv(fd_, buffer_.data() + had, kBodyReadChunk, MSG_DONTWAIT);
    buffer_.resize(had + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n > 0) return true;
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    fault_ = BodyFault::kReadFailed;  // closed or reset before the body ended
    return false;
  }
}

ssize_t GuardedStream::read(char* ptr, size_t size) {
  if (head_read_ < head_.size()) {
    const size_t n = std::min(size, head_.size() - head_read_);
    std::memcpy(ptr, head_.data() + head_read_, n);
    head_read_ += n;
    return static_cast<ssize_t>(n);
  }
  if (fault_ != BodyFault::kNone) return -1;
  if (body_read_ >= limits_.max_body_bytes) {
    fault_ = BodyFault::kTooLarge;
    return -1;
  }
  if (buffer_read_ == buffer_.size() && !Fill()) return -1;
  const size_t n =
      std::min({size, buffer_.size() - buffer_read_, limits_.max_body_bytes - body_read_});
  std::memcpy(ptr, buffer_.data() + buffer_read_, n);
  buffer_read_ += n;
  body_read_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t GuardedStream::write(const char* ptr, size_t size) {
  size_t sent = 0;
  while (sent < size) {
    const ssize_t n = send(fd_, ptr + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!WaitFor(fd_, POLLOUT, static_cast<int>(limits_.write_timeout.count()))) return -1;
    } else {
      return -1;
    }
  }
  return static_cast<ssize_t>(size);
}

void GuardedStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  ip = address_.remote_addr;
  port = address_.remote_port;
}

void GuardedStream::get_local_ip_and_port(std::string& ip, int& port) const {
  ip = address_.local_addr;
  port = address_.local_port;
}

std::string GuardedStream::TakeUnread() {
  std::string rest = buffer_.substr(buffer_read_);
  buffer_.clear();
  buffer_read_ = 0;
  return rest;
}

}  // namespace dscale::server
