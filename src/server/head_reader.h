#pragma once
// Every open connection of the server between requests: one thread (epoll) reads request heads
// as they arrive, so a client that sends its head slowly, or nothing, holds no worker thread.
//
//   accept ─► TryAdmit (else 503 at once) ─► Add(kNew) ─┐
//   worker: response written, connection reusable ─► Add(kIdle) ─┤ head reader thread:
//   worker: connection done ─► Add(kClosing) ───────────────────┘  read, HeadScanner,
//                                       CheckRequestHead ─► `ready` (a worker serves it)
//                                       or an error response (431, 400, 411, 413, 415, 501)
//
// Deadlines: a new connection must complete its head within header_timeout of its accept, an
// idle one is closed after idle_timeout without a byte, and once a request's first byte has
// come its head must be complete within header_timeout (408 otherwise). A connection being
// closed gets a short grace period in which its input is discarded, so that the client reads
// the response before the close instead of a reset.

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "server/connection_limits.h"
#include "server/connection_watch.h"
#include "server/request_head.h"

namespace dscale::server {

// A connection between requests: its socket and the bytes received for its next request.
struct Connection {
  int fd = -1;
  ConnectionAddress address;
  std::string received;
  int32_t served = 0;  // requests answered on it
};

// The addresses of an accepted socket, as cpp-httplib writes them.
ConnectionAddress AddressOfSocket(int fd);

class HeadReader {
 public:
  enum class Mode { kNew, kIdle, kClosing };
  // Called on the reader's thread with a connection whose head passed the checks: `head` (Range
  // fields dropped) and the bytes received after it.
  using Ready = std::function<void(Connection, std::string head, std::string rest)>;

  HeadReader(const ConnectionLimits& limits, Ready ready);
  ~HeadReader();
  HeadReader(const HeadReader&) = delete;
  HeadReader& operator=(const HeadReader&) = delete;

  Status Start();
  // Closes every connection it holds and joins its thread; later Adds close at once.
  void Stop();

  // Counts a new connection unless max_connections are open.
  bool TryAdmit();
  // Any thread: takes a connection admitted before (non-blocking socket).
  void Add(Connection connection, Mode mode);
  int32_t open_connections() const { return open_.load(); }

 private:
  struct Pending;

  void Run();
  void TakeIncoming();
  void OnReadable(int fd);
  void Progress(int fd);
  void Refuse(int fd, const ApiError& error);
  void BeginClosing(int fd);
  void ExpireDeadlines();
  void Drop(int fd);

  const ConnectionLimits& limits_;
  const Ready ready_;
  std::atomic<int32_t> open_{0};
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;

  std::mutex mu_;  // guards incoming_ and stopped_
  std::vector<std::pair<Connection, Mode>> incoming_;
  bool stopped_ = false;

  std::unordered_map<int, Pending> pending_;  // the reader's thread only
};

}  // namespace dscale::server
