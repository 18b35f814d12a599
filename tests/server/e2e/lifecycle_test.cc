// The server's life around requests: a client that disconnects (streaming or not, FIN or RST)
// has its request cancelled and its KV freed; a full queue answers 503 with Retry-After; SIGTERM
// lets in-flight requests finish, refuses new ones, then exits 0 — or 1 once --drain-timeout
// has passed or at a second signal, however slow a client is; a port in use is refused.

#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "server_process.h"

namespace dscale::e2e {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// A request that runs for thousands of steps: EOS is ignored.
std::string LongRequest(bool stream, int max_tokens = 3000) {
  return json{{"model", "tiny"},          {"prompt", "Tell me everything."},
              {"max_tokens", max_tokens}, {"temperature", 0},
              {"ignore_eos", true},       {"stream", stream}}
      .dump();
}

// Sends a request on a raw socket and reads until `marker` has arrived `count` times (0: does
// not wait). Returns the socket.
int StartRequest(int port, const std::string& body, const std::string& marker, int count,
                 std::string* received = nullptr) {
  const int fd = Connect(port);
  EXPECT_GE(fd, 0);
  const std::string bytes = PostBytes("/v1/completions", body);
  EXPECT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  auto seen = [&] {
    int n = 0;
    for (size_t at = got.find(marker); at != std::string::npos; at = got.find(marker, at + 1)) ++n;
    return n;
  };
  while (count > 0 && seen() < count && std::chrono::steady_clock::now() < deadline) {
    pollfd p{.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  if (count > 0) {
    EXPECT_GE(seen(), count) << got;
  }
  if (received) *received = got;
  return fd;
}

std::string Metrics(httplib::Client& client) {
  const httplib::Result res = client.Get("/metrics");
  return res ? res->body : std::string();
}

// Waits until nothing runs or waits and every KV page is free; false after 15 s.
bool WaitIdle(httplib::Client& client) {
  for (int i = 0; i < 300; ++i) {
    const httplib::Result health = client.Get("/health");
    if (health && health->status == 200) {
      const json h = json::parse(health->body);
      if (h["running"] == 0 && h["waiting"] == 0 && h["kv_pages_free"] == h["kv_pages_total"]) {
        return true;
      }
    }
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

void ExpectCancelledAndFreed(httplib::Client& client) {
  ASSERT_TRUE(WaitIdle(client));
  std::string metrics;
  for (int i = 0; i < 100; ++i) {
    metrics = Metrics(client);
    if (MetricValue(metrics, "dscale_requests_finished_total{reason=\"cancelled\"}") == 1) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(MetricValue(metrics, "dscale_requests_finished_total{reason=\"cancelled\"}"), 1);
  EXPECT_EQ(MetricValue(metrics, "dscale_requests_finished_total{reason=\"length\"}"), 0);
  EXPECT_LT(MetricValue(metrics, "dscale_generation_tokens_total"), 3000);
  EXPECT_EQ(MetricValue(metrics, "dscale_kv_pages_free"),
            MetricValue(metrics, "dscale_kv_pages_total"));
}

TEST(LifecycleTest, StreamingClientThatLeavesIsCancelled) {
  auto server = ServerProcess::Start();
  ASSERT_GT(server->port(), 0);
  httplib::Client client("127.0.0.1", server->port());
  const int fd = StartRequest(server->port(), LongRequest(true), "data: ", 3);
  close(fd);  // mid-stream
  ExpectCancelledAndFreed(client);
  EXPECT_EQ(server->Terminate(), 0);
}

TEST(LifecycleTest, WaitingClientThatLeavesIsCancelled) {
  auto server = ServerProcess::Start();
  ASSERT_GT(server->port(), 0);
  httplib::Client client("127.0.0.1", server->port());
  const int fd = StartRequest(server->port(), LongRequest(false), "", 0);
  for (int i = 0; i < 100; ++i) {  // until it runs
    const httplib::Result health = client.Get("/health");
    if (health && json::parse(health->body)["running"] == 1) break;
    std::this_thread::sleep_for(20ms);
  }
  close(fd);
  ExpectCancelledAndFreed(client);
  EXPECT_EQ(server->Terminate(), 0);
}

// Closes `fd` with a reset (RST) instead of an orderly end of stream (FIN).
void Reset(int fd) {
  const linger reset{.l_onoff = 1, .l_linger = 0};
  EXPECT_EQ(setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset)), 0);
  close(fd);
}

TEST(LifecycleTest, StreamingClientThatResetsIsCancelled) {
  auto server = ServerProcess::Start();
  ASSERT_GT(server->port(), 0);
  httplib::Client client("127.0.0.1", server->port());
  Reset(StartRequest(server->port(), LongRequest(true), "data: ", 1));
  ExpectCancelledAndFreed(client);
  EXPECT_EQ(server->Terminate(), 0);
}

// The reset comes as soon as the request runs: before the server's first look at the socket.
TEST(LifecycleTest, WaitingClientThatResetsAtOnceIsCancelled) {
  auto server = ServerProcess::Start();
  ASSERT_GT(server->port(), 0);
  httplib::Client client("127.0.0.1", server->port());
  const int fd = StartRequest(server->port(), LongRequest(false), "", 0);
  for (int i = 0; i < 500; ++i) {  // until it runs
    const httplib::Result health = client.Get("/health");
    if (health && json::parse(health->body)["running"] == 1) break;
    std::this_thread::sleep_for(2ms);
  }
  Reset(fd);
  ExpectCancelledAndFreed(client);
  EXPECT_EQ(server->Terminate(), 0);
}

TEST(LifecycleTest, FullQueueAnswers503WithRetryAfter) {
  auto server = ServerProcess::Start({"--max-running", "1", "--max-queue", "1"});
  ASSERT_GT(server->port(), 0);
  httplib::Client client("127.0.0.1", server->port());
  const int running = StartRequest(server->port(), LongRequest(true), "data: ", 1);
  const int waiting = StartRequest(server->port(), LongRequest(true), "", 0);
  for (int i = 0; i < 200; ++i) {
    const json h = json::parse(client.Get("/health")->body);
    if (h["running"] == 1 && h["waiting"] == 1) break;
    std::this_thread::sleep_for(20ms);
  }
  const httplib::Result busy =
      client.Post("/v1/completions", R"({"model": "tiny", "prompt": "x"})", "application/json");
  ASSERT_TRUE(busy);
  EXPECT_EQ(busy->status, 503);
  EXPECT_EQ(busy->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(busy->body)["error"]["code"], "overloaded");
  close(running);
  close(waiting);
  ASSERT_TRUE(WaitIdle(client));
  const httplib::Result ok =
      client.Post("/v1/completions", R"({"model": "tiny", "prompt": "x", "max_tokens": 3})",
                  "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(server->Terminate(), 0);
}

TEST(LifecycleTest, SigtermDrainsInFlightRequestsThenExits) {
  auto server = ServerProcess::Start();
  ASSERT_GT(server->port(), 0);
  std::string stream;
  const int fd = StartRequest(server->port(), LongRequest(true, 1500), "data: ", 2, &stream);
  ASSERT_EQ(kill(server->pid(), SIGTERM), 0);
  std::this_thread::sleep_for(100ms);

  // New requests are refused while the old one finishes.
  httplib::Client client("127.0.0.1", server->port());
  const httplib::Result refused =
      client.Post("/v1/completions", R"({"model": "tiny", "prompt": "x"})", "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(json::parse(refused->body)["error"]["code"], "shutting_down");
  EXPECT_EQ(client.Get("/health")->status, 503);

  // The stream runs to its end.
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (stream.find("data: [DONE]") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    stream.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  EXPECT_NE(stream.find("\"finish_reason\":\"length\""), std::string::npos);
  EXPECT_NE(stream.find("data: [DONE]"), std::string::npos);
  EXPECT_EQ(server->WaitExit(), 0) << server->Log();
  EXPECT_NE(server->Log().find("draining 1 request(s)"), std::string::npos) << server->Log();
}

// The server side of the loopback connection whose client end is `client_fd` has read all it
// was sent (its receive queue in /proc/net/tcp is empty): a worker thread is reading it.
bool ServerHasRead(int server_port, int client_fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(client_fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  char local[16], remote[16];  // the server side: local = server port, remote = client port
  std::snprintf(local, sizeof(local), ":%04X", server_port);
  std::snprintf(remote, sizeof(remote), ":%04X", ntohs(addr.sin_port));
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  while (std::getline(tcp, line)) {
    std::istringstream fields(line);
    std::string slot, local_addr, remote_addr, state, queues;
    fields >> slot >> local_addr >> remote_addr >> state >> queues;
    if (local_addr.ends_with(local) && remote_addr.ends_with(remote)) {
      return queues.substr(queues.find(':') + 1) == "00000000";
    }
  }
  return false;
}

// A client that sends its request body one byte at a time, never finishing it, for up to
// `seconds` (within --body-timeout): it holds an HTTP worker thread, and so the server's stop.
// (A client slow to send its headers holds none: the head reader waits for those.) Constructed
// once a worker has read its first bytes.
class SlowClient {
 public:
  SlowClient(int port, int seconds) : fd_(Connect(port)) {
    EXPECT_GE(fd_, 0);
    const std::string head =
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: 100000\r\n\r\n{";
    EXPECT_EQ(send(fd_, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
    for (int i = 0; i < 500 && !ServerHasRead(port, fd_); ++i) std::this_thread::sleep_for(20ms);
    EXPECT_TRUE(ServerHasRead(port, fd_));
    thread_ = std::thread([this, seconds] {
      for (int i = 0; i < seconds * 5 && !stop_; ++i) {
        if (send(fd_, "a", 1, MSG_NOSIGNAL) != 1) break;
        std::this_thread::sleep_for(200ms);
      }
    });
  }
  ~SlowClient() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }

 private:
  int fd_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(LifecycleTest, DrainEndsAtItsDeadlineWhateverASlowClientDoes) {
  auto server = ServerProcess::Start({"--drain-timeout", "2"});
  ASSERT_GT(server->port(), 0);
  SlowClient slow(server->port(), 30);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(server->pid(), SIGTERM), 0);
  EXPECT_EQ(server->WaitExit(20s), 1) << server->Log();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_NE(server->Log().find("--drain-timeout of 2 s passed"), std::string::npos)
      << server->Log();
}

TEST(LifecycleTest, SecondSignalExitsAtOnce) {
  auto server = ServerProcess::Start();  // the default drain deadline: 30 s
  ASSERT_GT(server->port(), 0);
  SlowClient slow(server->port(), 30);
  ASSERT_EQ(kill(server->pid(), SIGTERM), 0);
  std::this_thread::sleep_for(500ms);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(server->pid(), SIGINT), 0);
  EXPECT_EQ(server->WaitExit(20s), 1) << server->Log();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_NE(server->Log().find("second signal"), std::string::npos) << server->Log();
}

// Capacity flags out of range, or a cache that could not run even one request, stop the server
// before it listens, with a message naming the flag.
TEST(LifecycleTest, CapacityItCannotServeIsRefusedBeforeListening) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--max-running", "0"}, "--max-running: Value 0 not in range 1 to 64"},
      {{"--max-running", "65"}, "--max-running: Value 65 not in range 1 to 64"},
      {{"--http-threads", "1000000"}, "--http-threads: Value 1000000 not in range"},
      {{"--max-queue", "2147483647"}, "--max-queue: Value 2147483647 not in range"},
      {{"--kv-tokens", "16"}, "could not run even a one-token prompt"},
      {{"--default-max-tokens", "100000"}, "must be at most 4095: the context length is 4096"},
  };
  for (const auto& [flags, message] : cases) {
    auto server = ServerProcess::Spawn(flags, 30s);
    EXPECT_EQ(server->port(), -1) << flags[0];
    EXPECT_NE(server->WaitExit(30s), 0) << flags[0];
    EXPECT_NE(server->Log().find(message), std::string::npos) << server->Log();
  }
}

// A tokenizer with ids the model's vocabulary lacks (Qwen3's, 151669 ids, for a 512-token model)
// would encode text the model cannot embed: refused before listening, naming the file.
TEST(LifecycleTest, ATokenizerBeyondTheVocabularyIsRefusedAtStartUp) {
  auto server = ServerProcess::Spawn(
      {"--tokenizer", std::string(DSCALE_TEST_DATA_DIR) + "/tokenizer/qwen3"}, 30s);
  EXPECT_EQ(server->port(), -1);
  EXPECT_EQ(server->WaitExit(30s), 1);
  const std::string log = server->Log();
  EXPECT_NE(log.find("tokenizer/qwen3/added_tokens.json"), std::string::npos) << log;
  EXPECT_NE(log.find("token \"</think>\" has id 151668, outside the model's vocabulary of 512 "
                     "ids"),
            std::string::npos)
      << log;
}

// A request's n choices are admitted together or not at all: a refused n = 4 takes no slot from
// the n = 1 request sent straight after it and counts no cancellation; more choices than the
// server ever holds is a 400 naming n, never a 503 to retry.
TEST(LifecycleTest, ChoicesAreAdmittedAllOrNone) {
  auto server = ServerProcess::Start({"--max-running", "2", "--max-queue", "2"});
  ASSERT_GT(server->port(), 0);
  httplib::Client client("127.0.0.1", server->port());
  client.set_read_timeout(120s);
  // One long request holds one of the 4 slots throughout.
  httplib::Client holding("127.0.0.1", server->port());
  holding.set_read_timeout(300s);
  std::thread holder([&holding] {
    holding.Post(
        "/v1/completions",
        json{{"model", "tiny"}, {"prompt", "hold"}, {"max_tokens", 4000}, {"ignore_eos", true}}
            .dump(),
        "application/json");
  });
  for (int i = 0; i < 200; ++i) {
    const httplib::Result health = client.Get("/health");
    if (health && json::parse(health->body)["running"] == 1) break;
    std::this_thread::sleep_for(10ms);
  }
  const auto post = [&](int n) {
    const httplib::Result res =
        client.Post("/v1/completions",
                    json{{"model", "tiny"}, {"prompt", "x"}, {"max_tokens", 2}, {"n", n}}.dump(),
                    "application/json");
    return res ? std::make_pair(res->status, json::parse(res->body, nullptr, false))
               : std::make_pair(0, json());
  };
  for (int round = 0; round < 5; ++round) {
    EXPECT_EQ(post(4).first, 503) << "round " << round;
    const auto [status, answer] = post(1);
    EXPECT_EQ(status, 200) << "round " << round << ": " << answer.dump();
  }
  // Integral floats are integers (clients that send every number as a float).
  const httplib::Result floats = client.Post(
      "/v1/completions", R"({"model": "tiny", "prompt": "x", "max_tokens": 2.0, "n": 2.0})",
      "application/json");
  ASSERT_TRUE(floats);
  EXPECT_EQ(floats->status, 200) << floats->body;
  EXPECT_EQ(json::parse(floats->body, nullptr, false)["choices"].size(), 2u) << floats->body;
  const auto [status, answer] = post(5);
  EXPECT_EQ(status, 400) << answer.dump();
  EXPECT_EQ(answer["error"]["param"], "n") << answer.dump();
  EXPECT_NE(answer["error"]["message"].dump().find("must be at most 4"), std::string::npos)
      << answer.dump();
  const std::string metrics = Metrics(client);
  EXPECT_EQ(MetricValue(metrics, "dscale_requests_finished_total{reason=\"cancelled\"}"), 0);
  holding.stop();  // the long request's client goes away; the server cancels it
  holder.join();
  EXPECT_EQ(server->Terminate(), 0) << server->Log();
}

// prompt token ids 1, 1, ... (`length` of them).
json Ids(int length) { return json(std::vector<int>(static_cast<size_t>(length), 1)); }

// SIGTERM while the server starts (here dspark profiling its steps-per-second table on the bundled
// pair, seconds long) ends it within a second with status 0: nothing was accepted, so nothing
// is drained.
TEST(LifecycleTest, ASignalDuringStartUpExitsAtOnce) {
  const std::string models = DSCALE_MODELS_DIR;
  // Half a second in: loading is done and the profiling (seconds here) under way.
  auto server = ServerProcess::Spawn({"--target", models + "/tiny-target", "--drafter",
                                      models + "/tiny-dflash", "--spec", "dspark"},
                                     500ms);
  const bool starting = server->port() == -1;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(server->Terminate(30s), 0) << server->Log();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0)
      << server->Log();
  // (A machine that profiles in under half a second was already serving: it drained instead.)
  if (starting) {
    EXPECT_NE(server->Log().find("during start-up: exiting"), std::string::npos) << server->Log();
  }
}

// Resident memory of process `pid` in MiB (VmRSS), or -1.
double RssMiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024;
  }
  return -1;
}

// A flood of 16-choice requests with 20 top log-probabilities a token leaves the idle server's
// resident memory within a bound of where it started: what the responses allocated on the HTTP
// threads goes back (one malloc arena per core, trimmed when the engine goes idle), and the KV
// cache holds only the pages written. Prints the figures.
TEST(LifecycleTest, AChoicesFloodLeavesMemoryBounded) {
  auto server = ServerProcess::Start({"--max-queue", "64", "--kv-tokens", "8192"});
  ASSERT_GT(server->port(), 0);
  httplib::Client client("127.0.0.1", server->port());
  client.set_read_timeout(300s);
  const std::string body = json{
      {"model", "tiny"},   {"prompt", "Tell me a long story"},
      {"n", 16},           {"max_tokens", 128},
      {"logprobs", 20},    {"temperature", 1.0},
      {"ignore_eos", true}}.dump();
  ASSERT_EQ(client.Post("/v1/completions", body, "application/json")->status, 200);
  ASSERT_TRUE(WaitIdle(client));
  const double before = RssMiB(server->pid());
  for (int round = 0; round < 3; ++round) {
    std::vector<std::thread> clients;
    for (int i = 0; i < 4; ++i) {
      clients.emplace_back([&] {
        httplib::Client c("127.0.0.1", server->port());
        c.set_read_timeout(300s);
        const httplib::Result res = c.Post("/v1/completions", body, "application/json");
        EXPECT_TRUE(res && res->status == 200);
      });
    }
    for (std::thread& t : clients) t.join();
  }
  ASSERT_TRUE(WaitIdle(client));
  std::this_thread::sleep_for(500ms);
  const double after = RssMiB(server->pid());
  std::printf(
      "RSS %.1f MiB before 12 requests of 16 choices × 128 tokens with 20 top logprobs, "
      "%.1f MiB after\n",
      before, after);
  EXPECT_LT(after - before, 32.0);  // 16 MiB here; 78 MiB with glibc's default arenas, untrimmed
  EXPECT_EQ(server->Terminate(), 0) << server->Log();
}

// /v1/models describes one model with one `created` (the server's start), whenever it is asked.
TEST(LifecycleTest, TheModelCardIsFixed) {
  auto server = ServerProcess::Start();
  ASSERT_GT(server->port(), 0);
  httplib::Client client("127.0.0.1", server->port());
  const auto card = [&] {
    const httplib::Result res = client.Get("/v1/models");
    return res ? json::parse(res->body, nullptr, false) : json();
  };
  const json first = card();
  std::this_thread::sleep_for(1100ms);
  EXPECT_EQ(card(), first);
  EXPECT_EQ(first["data"][0]["id"], "tiny") << first.dump();
  EXPECT_EQ(server->Terminate(), 0) << server->Log();
}

// On the default server (16 running at most) one request of 16 choices runs 8 of them at once,
// so another client's request starts beside them instead of waiting for a choice to end.
TEST(LifecycleTest, OneRequestsChoicesHoldAtMostHalfTheSlots) {
  auto server = ServerProcess::Start();
  ASSERT_GT(server->port(), 0);
  httplib::Client client("127.0.0.1", server->port());
  client.set_read_timeout(120s);
  httplib::Client big("127.0.0.1", server->port());
  big.set_read_timeout(300s);
  std::thread big_request([&big] {
    big.Post("/v1/completions",
             json{{"model", "tiny"},
                  {"prompt", "x"},
                  {"max_tokens", 3000},
                  {"n", 16},
                  {"ignore_eos", true}}
                 .dump(),
             "application/json");
  });
  int most_running = 0;
  for (int i = 0; i < 1000 && most_running == 0; ++i) {
    const httplib::Result health = client.Get("/health");
    if (health) most_running = json::parse(health->body)["running"].get<int>();
    std::this_thread::sleep_for(5ms);
  }
  for (int i = 0; i < 50; ++i) {
    const httplib::Result health = client.Get("/health");
    if (health)
      most_running = std::max(most_running, json::parse(health->body)["running"].get<int>());
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_GT(most_running, 0);
  EXPECT_LE(most_running, 8);
  const auto start = std::chrono::steady_clock::now();
  const httplib::Result small = client.Post(
      "/v1/completions", json{{"model", "tiny"}, {"prompt", "y"}, {"max_tokens", 4}}.dump(),
      "application/json");
  ASSERT_TRUE(small);
  EXPECT_EQ(small->status, 200) << small->body;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
  big.stop();
  big_request.join();
  EXPECT_EQ(server->Terminate(), 0) << server->Log();
}

// One client looping requests that can never fit (n past the server's slots: 400) does not
// take slots from another looping n = 1 requests on the same server: every one of those is 200.
TEST(LifecycleTest, UnsatisfiableRequestsDoNotStarveOthers) {
  auto server = ServerProcess::Start({"--max-running", "2", "--max-queue", "2"});
  ASSERT_GT(server->port(), 0);
  const auto deadline = std::chrono::steady_clock::now() + 3s;
  std::atomic<int> refused{0}, other{0};
  std::thread flood([&] {
    httplib::Client c("127.0.0.1", server->port());
    const std::string body =
        json{{"model", "tiny"}, {"prompt", "x"}, {"max_tokens", 5}, {"n", 16}}.dump();
    for (int i = 0; i < 5000 && std::chrono::steady_clock::now() < deadline; ++i) {
      const httplib::Result res = c.Post("/v1/completions", body, "application/json");
      (res && res->status == 400 ? refused : other)++;
    }
  });
  httplib::Client client("127.0.0.1", server->port());
  client.set_read_timeout(60s);
  const std::string body = json{{"model", "tiny"}, {"prompt", "x"}, {"max_tokens", 2}}.dump();
  int served = 0;
  for (int i = 0; i < 500 && std::chrono::steady_clock::now() < deadline; ++i) {
    const httplib::Result res = client.Post("/v1/completions", body, "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << res->body;
    served += res->status == 200;
  }
  flood.join();
  std::printf("n = 1 requests served: %d; n = 16 refused: %d (other answers: %d)\n", served,
              refused.load(), other.load());
  EXPECT_GT(served, 0);
  EXPECT_GT(refused.load(), 0);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(server->Terminate(), 0) << server->Log();
}

// The head-of-line case: three choices of a 3,000-token prompt with 1,000 tokens each fill the
// KV cache one at a time; a 5-token request behind them fits the pages left and starts at once
// instead of waiting for the choices ahead of it (Engine::Admit). Its latency with and without
// the big request is printed.
TEST(LifecycleTest, ASmallRequestIsNotHeldBehindOneShortOfPages) {
  auto server = ServerProcess::Start({"--kv-tokens", "4200", "--max-running", "4"});
  ASSERT_GT(server->port(), 0);
  httplib::Client client("127.0.0.1", server->port());
  client.set_read_timeout(120s);
  const std::string small_body =
      json{{"model", "tiny"}, {"prompt", Ids(5)}, {"max_tokens", 5}, {"ignore_eos", true}}.dump();
  const auto timed_small = [&] {
    const auto start = std::chrono::steady_clock::now();
    const httplib::Result res = client.Post("/v1/completions", small_body, "application/json");
    EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const double alone = timed_small();
  httplib::Client big("127.0.0.1", server->port());
  big.set_read_timeout(300s);
  std::thread big_request([&big] {
    big.Post("/v1/completions",
             json{{"model", "tiny"},
                  {"prompt", Ids(3000)},
                  {"max_tokens", 1000},
                  {"n", 3},
                  {"ignore_eos", true}}
                 .dump(),
             "application/json");
  });
  // Until the first choice runs and the others wait for pages.
  for (int i = 0; i < 400; ++i) {
    const httplib::Result health = client.Get("/health");
    if (health) {
      const json h = json::parse(health->body);
      if (h["running"] == 1 && h["waiting"] == 2) break;
    }
    std::this_thread::sleep_for(10ms);
  }
  const double behind = timed_small();
  std::printf("5-token request: %.3f s alone, %.3f s behind the 3-choice request\n", alone, behind);
  EXPECT_LT(behind, 1.0);  // waiting for the first choice to end took 2 s here
  big.stop();
  big_request.join();
  EXPECT_EQ(server->Terminate(), 0) << server->Log();
}

// The default KV cache holds --max-running full contexts (the fixture's model: 4096 positions):
// one request may use every position of the context, with or without max_tokens, and one more
// is refused as context_length_exceeded naming the field at fault.
TEST(LifecycleTest, ARequestOfTheWholeContextIsServed) {
  auto server = ServerProcess::Start({"--max-running", "1"});
  ASSERT_GT(server->port(), 0);
  httplib::Client client("127.0.0.1", server->port());
  client.set_read_timeout(120s);
  const auto post = [&](const json& body) {
    const httplib::Result res = client.Post("/v1/completions", body.dump(), "application/json");
    EXPECT_TRUE(res);
    return res ? std::make_pair(res->status, json::parse(res->body, nullptr, false))
               : std::make_pair(0, json());
  };
  for (const json& body :
       {json{{"model", "tiny"}, {"prompt", Ids(4095)}, {"max_tokens", 1}, {"ignore_eos", true}},
        json{{"model", "tiny"}, {"prompt", Ids(4095)}, {"ignore_eos", true}},
        json{{"model", "tiny"}, {"prompt", Ids(4000)}, {"max_tokens", 96}, {"ignore_eos", true}},
        json{{"model", "tiny"}, {"prompt", Ids(1)}, {"max_tokens", 4095}, {"ignore_eos", true}}}) {
    const auto [status, answer] = post(body);
    EXPECT_EQ(status, 200) << answer.dump();
    EXPECT_EQ(answer["usage"]["total_tokens"], 4096) << answer.dump();
  }
  const std::tuple<json, std::string, std::string> refused[] = {
      {json{{"model", "tiny"}, {"prompt", Ids(4096)}}, "prompt", "leaves no room"},
      {json{{"model", "tiny"}, {"prompt", Ids(4094)}, {"max_tokens", 3}}, "max_tokens",
       "must be at most 2"},
  };
  for (const auto& [body, param, message] : refused) {
    const auto [status, answer] = post(body);
    EXPECT_EQ(status, 400) << answer.dump();
    EXPECT_EQ(answer["error"]["code"], "context_length_exceeded") << answer.dump();
    EXPECT_EQ(answer["error"]["param"], param) << answer.dump();
    EXPECT_NE(answer["error"]["message"].dump().find(message), std::string::npos) << answer.dump();
  }
  EXPECT_EQ(server->Terminate(), 0) << server->Log();

  // A cache smaller than a context (--kv-tokens) says so: the KV cache, not the context, is the
  // limit, and a request without max_tokens gets what is left of it.
  server = ServerProcess::Start({"--max-running", "1", "--kv-tokens", "1024"});
  ASSERT_GT(server->port(), 0);
  httplib::Client small("127.0.0.1", server->port());
  small.set_read_timeout(120s);
  httplib::Result res = small.Post(
      "/v1/completions", json{{"model", "tiny"}, {"prompt", Ids(1000)}, {"max_tokens", 100}}.dump(),
      "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;
  json answer = json::parse(res->body, nullptr, false);
  EXPECT_EQ(answer["error"]["code"], "context_length_exceeded") << res->body;
  EXPECT_EQ(answer["error"]["param"], "max_tokens") << res->body;
  EXPECT_NE(res->body.find("KV cache holds 1010 tokens"), std::string::npos) << res->body;
  res = small.Post("/v1/completions",
                   json{{"model", "tiny"}, {"prompt", Ids(1000)}, {"ignore_eos", true}}.dump(),
                   "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  answer = json::parse(res->body, nullptr, false);
  EXPECT_EQ(answer["usage"]["total_tokens"], 1010) << res->body;
  EXPECT_EQ(server->Terminate(), 0) << server->Log();
}

// --max-running N full contexts run at once in the default cache: two requests of 4096 tokens
// each are both running (none waits for KV pages).
TEST(LifecycleTest, MaxRunningFullContextsRunAtOnce) {
  auto server = ServerProcess::Start({"--max-running", "2"});
  ASSERT_GT(server->port(), 0);
  httplib::Client client("127.0.0.1", server->port());
  const auto body = [](int prompt) {
    return json{{"model", "tiny"},    {"prompt", Ids(prompt)}, {"max_tokens", 4096 - prompt},
                {"ignore_eos", true}, {"temperature", 0},      {"stream", true}}
        .dump();
  };
  // Each stream has sent its first token once it is running; both then run for hundreds of
  // steps, long enough to look. /health reports the engine as of its last step, which may end
  // after the first token went out (b's prompt comes from the prefix cache but for one page, so
  // b starts within one step), so the look waits for that step.
  const int a = StartRequest(server->port(), body(3000), "data: ", 1);
  const int b = StartRequest(server->port(), body(2500), "data: ", 1);
  json h;
  for (int i = 0; i < 100 && h["running"] != 2; ++i) {
    if (i > 0) std::this_thread::sleep_for(20ms);
    const httplib::Result health = client.Get("/health");
    ASSERT_TRUE(health);
    h = json::parse(health->body, nullptr, false);
  }
  EXPECT_EQ(h["running"], 2) << h.dump();
  EXPECT_EQ(h["waiting"], 0) << h.dump();
  close(a);
  close(b);
  EXPECT_TRUE(WaitIdle(client));
  EXPECT_EQ(server->Terminate(), 0) << server->Log();
}

// A hybrid target (Gated DeltaNet layers) behind the server: prompts that share a start resume
// from the recurrent state kept after the shared pages, and answer what a server keeping no
// states (so computing every prompt in full) answers.
TEST(LifecycleTest, AHybridTargetResumesSharedPromptsFromTheirRecurrentState) {
  const auto answers = [](const std::vector<std::string>& flags, json* metrics) {
    std::vector<std::string> extra = {"--target", E2eDir() + "/tiny-hybrid", "--drafter",
                                      E2eDir() + "/tiny-hybrid-drafter"};
    extra.insert(extra.end(), flags.begin(), flags.end());
    auto server = ServerProcess::Start(extra);
    std::vector<std::string> texts;
    if (server->port() <= 0) return texts;
    httplib::Client client("127.0.0.1", server->port());
    for (int i = 0; i < 3; ++i) {
      std::vector<int> prompt;
      for (int j = 0; j < 200; ++j) prompt.push_back(3 + (j * 37) % 500);  // the shared start
      for (int j = 0; j < 5 + i; ++j) prompt.push_back(100 + 50 * i + j);
      const httplib::Result res = client.Post(
          "/v1/completions",
          json{{"model", "tiny-hybrid"}, {"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}}
              .dump(),
          "application/json");
      EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
      if (res && res->status == 200)
        texts.push_back(json::parse(res->body, nullptr, false)["choices"][0]["text"]);
    }
    const httplib::Result m = client.Get("/metrics");
    EXPECT_TRUE(m);
    if (m) {
      (*metrics)["hit"] = MetricValue(m->body, "dscale_prefix_cache_hit_tokens_total");
      (*metrics)["states"] = MetricValue(m->body, "dscale_prefix_cache_states");
    }
    EXPECT_EQ(server->Terminate(), 0) << server->Log();
    return texts;
  };
  json kept, none;
  const std::vector<std::string> with_states = answers({}, &kept);
  const std::vector<std::string> in_full = answers({"--prefix-cache-states", "0"}, &none);
  ASSERT_EQ(with_states.size(), 3u);
  EXPECT_EQ(with_states, in_full);
  // The first prompt keeps its state after its last whole page (192 positions); the next two
  // resume there.
  EXPECT_EQ(kept["hit"], 2 * 192) << kept.dump();
  EXPECT_GE(kept["states"], 1) << kept.dump();
  EXPECT_EQ(none["hit"], 0) << none.dump();
  EXPECT_EQ(none["states"], 0) << none.dump();
}

// Recurrent states the memory cannot hold are refused at start-up, naming the flag to lower.
TEST(LifecycleTest, PrefixStatesBeyondTheMemoryAreRefusedAtStartUp) {
  auto server = ServerProcess::Spawn(
      {"--target", E2eDir() + "/tiny-hybrid", "--drafter", E2eDir() + "/tiny-hybrid-drafter",
       "--prefix-cache-states", "2000000000"},
      30s);
  EXPECT_EQ(server->port(), -1);
  EXPECT_EQ(server->WaitExit(30s), 1) << server->Log();
  EXPECT_NE(server->Log().find("of recurrent states"), std::string::npos) << server->Log();
  EXPECT_NE(server->Log().find("--prefix-cache-states"), std::string::npos) << server->Log();
}

TEST(LifecycleTest, APortInUseIsRefused) {
  auto first = ServerProcess::Start();
  ASSERT_GT(first->port(), 0);
  auto second = ServerProcess::Spawn({"--port", std::to_string(first->port())}, 30s);
  EXPECT_EQ(second->port(), -1);
  EXPECT_EQ(second->WaitExit(30s), 1) << second->Log();
  EXPECT_NE(second->Log().find("cannot listen on 127.0.0.1:" + std::to_string(first->port())),
            std::string::npos)
      << second->Log();
  EXPECT_EQ(first->Terminate(), 0);
}

}  // namespace
}  // namespace dscale::e2e
