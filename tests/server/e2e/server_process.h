#pragma once
// End-to-end helpers: a `dscale serve` child process on a free loopback port, serving the tiny
// model the CTest fixture made (server_e2e/tiny), and raw-socket exchanges for requests an
// HTTP client library will not send.

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace dscale::e2e {

// A well-formed completion request for the tiny model: four tokens.
inline const std::string kSmallCompletionBody =
    R"({"model": "tiny", "prompt": "Hello there", "max_tokens": 4})";

// Where the fixture put the model, the drafter and the server logs.
std::string E2eDir();

class ServerProcess {
 public:
  // Starts the server with the default flags, `extra` ("--flag", "value" pairs) replacing or
  // adding to them; fails the test
  // (fatally) when it does not come up within 60 s.
  static std::unique_ptr<ServerProcess> Start(const std::vector<std::string>& extra = {});
  // The same without requiring it to come up: port() is -1 when it did not (it may have exited;
  // see WaitExit and Log).
  static std::unique_ptr<ServerProcess> Spawn(
      const std::vector<std::string>& extra = {},
      std::chrono::milliseconds timeout = std::chrono::seconds(60));
  ~ServerProcess();  // kills the server if it is still running

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Whether the process is still alive (reaps it when it has exited).
  bool Running();
  // SIGTERM, then waits up to `timeout`: the exit status, or -1 when it did not exit in time.
  int Terminate(std::chrono::seconds timeout = std::chrono::seconds(60));
  // Waits up to `timeout` for the process to exit by itself: the exit status, or -1.
  int WaitExit(std::chrono::seconds timeout = std::chrono::seconds(60));
  // The server's stderr so far.
  std::string Log() const;

 private:
  ServerProcess() = default;
  pid_t pid_ = -1;
  int port_ = -1;
  int exit_status_ = -1;
  std::string log_path_;
};

// Sends `bytes` on a fresh connection to 127.0.0.1:port, optionally half-closes, and returns
// what the server sends back until the end of the response headers, the server closing the
// connection, or `timeout`. (cpp-httplib treats a half-closed connection as gone and does not
// answer on it.)
std::string RawExchange(int port, const std::string& bytes, bool half_close = false,
                        std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));

// A connected socket to 127.0.0.1:port (closed by the caller), or -1.
int Connect(int port);

// "HTTP/1.1 400 Bad Request\r\n..." → 400; 0 when there is no status line.
int StatusOf(const std::string& raw_response);

// The value of one sample ("dscale_kv_pages_free", "name{label=\"x\"}") in Prometheus text,
// or -1 when it is missing.
double MetricValue(const std::string& metrics, const std::string& sample);

// A raw HTTP/1.1 POST of a JSON body.
std::string PostBytes(const std::string& path, const std::string& body);

}  // namespace dscale::e2e
