#pragma once
// The stream cpp-httplib reads one request from and writes its response to: the head the head
// reader received and checked, then the body from the socket, bounded in bytes (chunk framing
// included) and in time. A read past the limit or the deadline fails and says which, so that
// the error handler answers 413 or 408 instead of the library's 400, and the connection is not
// reused.

#include <httplib.h>

#include <chrono>
#include <string>

#include "server/connection_limits.h"
#include "server/connection_watch.h"

namespace dscale::server {

class GuardedStream : public httplib::Stream {
 public:
  enum class BodyFault { kNone, kTooLarge, kTimedOut, kReadFailed };

  // Serves `head`, then `rest` (bytes received after the head), then the socket. The body
  // deadline starts now. While it lives, Current() on this thread returns it.
  GuardedStream(int fd, const ConnectionAddress& address, const ConnectionLimits& limits,
                std::string head, std::string rest);
  ~GuardedStream() override;
  GuardedStream(const GuardedStream&) = delete;
  GuardedStream& operator=(const GuardedStream&) = delete;

  // The stream the calling worker thread is serving a request from, or null.
  static GuardedStream* Current();

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }

  BodyFault fault() const { return fault_; }
  // Whether the connection can carry another request: nothing failed and the handler did not
  // ask to close it.
  bool reusable() const { return fault_ == BodyFault::kNone && !close_requested_; }
  void RequestClose() { close_requested_ = true; }
  // Bytes received and not read: the start of the next request.
  std::string TakeUnread();

 private:
  // Waits up to the body deadline for the socket to be readable, then reads into buffer_.
  bool Fill();

  const int fd_;
  const ConnectionAddress address_;
  const ConnectionLimits limits_;  // a copy: callers may pass a temporary
  const std::chrono::steady_clock::time_point body_deadline_;
  std::string head_;
  size_t head_read_ = 0;
  std::string buffer_;  // received after the head, not yet read
  size_t buffer_read_ = 0;
  size_t body_read_ = 0;
  BodyFault fault_ = BodyFault::kNone;
  bool close_requested_ = false;
  GuardedStream* previous_;  // Current() before this one
};

}  // namespace dscale::server
