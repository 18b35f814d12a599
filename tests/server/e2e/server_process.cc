#include "server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace dscale::e2e {
namespace {

// A client whose server went away must not be killed by SIGPIPE.
const bool kIgnoreSigpipe = [] {
  signal(SIGPIPE, SIG_IGN);
  return true;
}();

std::vector<std::string> DefaultArgs() {
  const std::string dir = E2eDir();
  return {DSCALE_BINARY,   "serve",  "--target", dir + "/tiny", "--drafter", dir + "/tiny-drafter",
          "--spec",        "dflash", "--host",   "127.0.0.1",   "--port",    "0",
          "--max-running", "16"};
}

// Reads the child's stdout until the "listening on" line; the port, or -1.
int ReadPort(int fd, std::chrono::milliseconds timeout) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string listening = "listening on http://";
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 200) <= 0) continue;
    char buf[512];
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) return -1;  // the server exited
    out.append(buf, static_cast<size_t>(n));
    // "listening on http://127.0.0.1:PORT (...)"
    const size_t at = out.find(listening);
    const size_t colon = at == std::string::npos ? at : out.find(':', at + listening.size());
    if (colon != std::string::npos && out.find(' ', colon) != std::string::npos) {
      return std::atoi(out.c_str() + colon + 1);
    }
  }
  return -1;
}

}  // namespace

std::string E2eDir() { return DSCALE_SERVER_E2E_DIR; }

std::unique_ptr<ServerProcess> ServerProcess::Start(const std::vector<std::string>& extra) {
  std::unique_ptr<ServerProcess> server = Spawn(extra);
  EXPECT_GT(server->port_, 0) << "the server did not start:\n" << server->Log();
  return server;
}

std::unique_ptr<ServerProcess> ServerProcess::Spawn(const std::vector<std::string>& extra,
                                                    std::chrono::milliseconds timeout) {
  static std::atomic<int> serial{0};
  std::unique_ptr<ServerProcess> server(new ServerProcess());
  server->log_path_ = ::testing::TempDir() + "dscale_serve_" + std::to_string(getpid()) + "_" +
                      std::to_string(serial++) + ".log";
  std::vector<std::string> args = DefaultArgs();
  for (size_t i = 0; i + 1 < extra.size(); i += 2) {
    const auto flag = std::find(args.begin(), args.end(), extra[i]);
    if (flag != args.end()) {
      *(flag + 1) = extra[i + 1];
    } else {
      args.insert(args.end(), {extra[i], extra[i + 1]});
    }
  }
  int out[2];
  EXPECT_EQ(pipe(out), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    const int log = open(server->log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (log >= 0) dup2(log, STDERR_FILENO);
    close(out[0]);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  server->pid_ = pid;
  server->port_ = ReadPort(out[0], timeout);
  // The child keeps writing to stdout rarely; leave the read end open so it never gets SIGPIPE.
  std::thread([fd = out[0]] {
    char buf[256];
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
    close(fd);
  }).detach();
  return server;
}

ServerProcess::~ServerProcess() {
  if (Running()) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

bool ServerProcess::Running() {
  if (pid_ < 0 || exit_status_ >= 0) return false;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == 0) return true;
  exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return false;
}

int ServerProcess::Terminate(std::chrono::seconds timeout) {
  if (Running()) kill(pid_, SIGTERM);
  return WaitExit(timeout);
}

int ServerProcess::WaitExit(std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (Running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Running() ? -1 : exit_status_;
}

std::string ServerProcess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

std::string RawExchange(int port, const std::string& bytes, bool half_close,
                        std::chrono::milliseconds timeout) {
  const int fd = Connect(port);
  if (fd < 0) return {};
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  if (half_close) shutdown(fd, SHUT_WR);
  std::string response;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    response.append(buf, static_cast<size_t>(n));
    if (response.find("\r\n\r\n") != std::string::npos) break;  // the status and headers
  }
  close(fd);
  return response;
}

int StatusOf(const std::string& raw_response) {
  // "HTTP/1.1 400 ..."
  if (raw_response.size() < 12 || !raw_response.starts_with("HTTP/1.")) return 0;
  return std::atoi(raw_response.substr(9, 3).c_str());
}

double MetricValue(const std::string& metrics, const std::string& sample) {
  std::istringstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    if (line.size() > sample.size() && line.starts_with(sample) && line[sample.size()] == ' ') {
      return std::stod(line.substr(sample.size() + 1));
    }
  }
  return -1;
}

std::string PostBytes(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace dscale::e2e
