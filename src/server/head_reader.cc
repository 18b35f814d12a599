#include "server/head_reader.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace dscale::server {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr size_t kHeadReadChunk = 16u << 10;
constexpr int kMaxEvents = 256;
constexpr int kTickMs = 50;  // deadlines are checked at least this often
// A connection being closed: how long its input is read and discarded, and how much of it.
constexpr auto kClosingGrace = std::chrono::milliseconds(1000);
constexpr size_t kClosingDiscardBytes = 1u << 20;

std::string Describe(const sockaddr_storage& addr, socklen_t len, int* port) {
  if (addr.ss_family == AF_INET) {
    *port = ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  } else if (addr.ss_family == AF_INET6) {
    *port = ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  }
  char host[NI_MAXHOST] = {};
  getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof(host), nullptr, 0,
              NI_NUMERICHOST);
  return host;
}

void SendBestEffort(int fd, const std::string& bytes) {
  // A fresh or idle socket's send buffer takes a small response whole; never wait for it.
  [[maybe_unused]] const ssize_t n =
      send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace

ConnectionAddress AddressOfSocket(int fd) {
  ConnectionAddress a;
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    a.local_addr = Describe(addr, len, &a.local_port);
  }
  len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    a.remote_addr = Describe(addr, len, &a.remote_port);
  }
  return a;
}

struct HeadReader::Pending {
  Connection connection;
  HeadScanner scanner;
  Mode mode;
  SteadyClock::time_point deadline;
  size_t discarded = 0;  // kClosing: input read and dropped
};

HeadReader::HeadReader(const ConnectionLimits& limits, Ready ready)
    : limits_(limits), ready_(std::move(ready)) {}

HeadReader::~HeadReader() {
  Stop();
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

Status HeadReader::Start() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0) {
    return IoError(std::string("cannot create the connection poller: ") + std::strerror(errno));
  }
  epoll_event event{.events = EPOLLIN, .data = {.fd = wake_fd_}};
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &event);
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void HeadReader::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  if (thread_.joinable()) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = write(wake_fd_, &one, sizeof(one));
    thread_.join();
  }
}

bool HeadReader::TryAdmit() {
  int32_t open = open_.load();
  while (open < limits_.max_connections) {
    if (open_.compare_exchange_weak(open, open + 1)) return true;
  }
  return false;
}

void HeadReader::Add(Connection connection, Mode mode) {
  {
    std::lock_guard lock(mu_);
    if (!stopped_) {
      incoming_.emplace_back(std::move(connection), mode);
      const uint64_t one = 1;
      [[maybe_unused]] const ssize_t n = write(wake_fd_, &one, sizeof(one));
      return;
    }
  }
  close(connection.fd);
  --open_;
}

void HeadReader::Run() {
  epoll_event events[kMaxEvents];
  while (true) {
    const int n = epoll_wait(epoll_fd_, events, kMaxEvents, kTickMs);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == wake_fd_) {
        uint64_t count;
        [[maybe_unused]] const ssize_t r = read(wake_fd_, &count, sizeof(count));
        continue;
      }
      OnReadable(events[i].data.fd);
    }
    TakeIncoming();
    ExpireDeadlines();
    std::lock_guard lock(mu_);
    if (stopped_) break;
  }
  for (auto& [fd, pending] : pending_) {
    close(fd);
    --open_;
  }
  pending_.clear();
  for (auto& [connection, mode] : incoming_) {
    close(connection.fd);
    --open_;
  }
  incoming_.clear();
}

void HeadReader::TakeIncoming() {
  std::vector<std::pair<Connection, Mode>> incoming;
  {
    std::lock_guard lock(mu_);
    incoming.swap(incoming_);
  }
  const auto now = SteadyClock::now();
  for (auto& [connection, mode] : incoming) {
    const int fd = connection.fd;
    const bool has_bytes = !connection.received.empty();
    if (mode == Mode::kIdle && has_bytes) mode = Mode::kNew;  // a pipelined request
    auto deadline =
        now + (mode == Mode::kIdle && !has_bytes ? limits_.idle_timeout : limits_.header_timeout);
    if (mode == Mode::kClosing) {
      shutdown(fd, SHUT_WR);  // the response is out: FIN now, then discard what still comes
      deadline = now + kClosingGrace;
    }
    pending_.emplace(fd, Pending{.connection = std::move(connection),
                                 .scanner = HeadScanner(limits_),
                                 .mode = mode,
                                 .deadline = deadline});
    epoll_event event{.events = EPOLLIN | EPOLLRDHUP, .data = {.fd = fd}};
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) {
      Drop(fd);
      continue;
    }
    if (mode != Mode::kClosing && has_bytes) Progress(fd);
  }
}

void HeadReader::OnReadable(int fd) {
  const auto it = pending_.find(fd);
  if (it == pending_.end()) return;
  Pending& p = it->second;
  char buf[kHeadReadChunk];
  ssize_t n = 0;
  do {
    n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (n <= 0) return Drop(fd);  // the client closed or reset the connection
  if (p.mode == Mode::kClosing) {
    p.discarded += static_cast<size_t>(n);
    if (p.discarded > kClosingDiscardBytes) Drop(fd);
    return;
  }
  if (p.mode == Mode::kIdle) {  // a new request's first bytes: its head deadline starts
    p.mode = Mode::kNew;
    p.deadline = SteadyClock::now() + limits_.header_timeout;
  }
  p.connection.received.append(buf, static_cast<size_t>(n));
  Progress(fd);
}

void HeadReader::Progress(int fd) {
  Pending& p = pending_.at(fd);
  const std::string& received = p.connection.received;
  switch (p.scanner.Scan(received)) {
    case HeadScanner::State::kIncomplete:
      return;
    case HeadScanner::State::kTooLarge:
      return Refuse(fd, p.scanner.TooLarge());
    case HeadScanner::State::kComplete:
      break;
  }
  const size_t head_bytes = p.scanner.head_bytes();
  HeadCheck check = CheckRequestHead(std::string_view(received).substr(0, head_bytes), limits_);
  if (check.refusal) return Refuse(fd, *check.refusal);
  std::string rest = received.substr(head_bytes);
  Connection connection = std::move(p.connection);
  connection.received.clear();
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  pending_.erase(fd);
  ready_(std::move(connection), std::move(check.head), std::move(rest));
}

void HeadReader::Refuse(int fd, const ApiError& error) {
  SendBestEffort(fd, ErrorResponseBytes(error));
  BeginClosing(fd);
}

void HeadReader::BeginClosing(int fd) {
  Pending& p = pending_.at(fd);
  shutdown(fd, SHUT_WR);
  p.mode = Mode::kClosing;
  p.deadline = SteadyClock::now() + kClosingGrace;
  p.connection.received.clear();
  p.connection.received.shrink_to_fit();
}

void HeadReader::ExpireDeadlines() {
  const auto now = SteadyClock::now();
  std::vector<int> expired;
  for (const auto& [fd, p] : pending_) {
    if (now >= p.deadline) expired.push_back(fd);
  }
  for (const int fd : expired) {
    const Pending& p = pending_.at(fd);
    if (p.mode == Mode::kClosing || p.connection.received.empty()) {
      Drop(fd);
      continue;
    }
    const auto seconds = std::chrono::duration<double>(limits_.header_timeout).count();
    char limit[32];
    std::snprintf(limit, sizeof(limit), "%g", seconds);
    Refuse(fd, {.status = 408,
                .message = std::string("the request headers did not arrive within ") + limit +
                           " s (--header-timeout)"});
  }
}

void HeadReader::Drop(int fd) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  pending_.erase(fd);
  --open_;
}

}  // namespace dscale::server
