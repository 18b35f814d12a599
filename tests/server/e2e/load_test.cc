// Load: 64 concurrent clients × 500 requests each (a closed loop: a client sends its next
// request when the last one is answered) against one server at c = 16 (max-running). Every
// request must complete with the same text as when its prompt was sent alone (greedy),
// streamed or not, chat or completion; afterwards nothing runs and every KV page is free.
// Prints throughput and latency percentiles.
//
// DSCALE_LOAD_CLIENTS and DSCALE_LOAD_REQUESTS (per client) change the size of the run.

#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"

namespace dscale::e2e {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr int kPrompts = 48;
constexpr int kMaxTokens = 8;

int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && std::atoi(value) > 0 ? std::atoi(value) : fallback;
}

struct Answer {
  std::string text;
  std::string finish_reason;
  bool operator==(const Answer&) const = default;
};

std::string Body(int prompt, bool chat, bool stream) {
  const std::string text = "Request " + std::to_string(prompt) + ": what is the weather like?";
  json body = {
      {"model", "tiny"}, {"max_tokens", kMaxTokens}, {"temperature", 0}, {"stream", stream}};
  if (chat) {
    body["messages"] = json::array({{{"role", "user"}, {"content", text}}});
  } else {
    body["prompt"] = text;
  }
  return body.dump();
}

// The text and finish reason of an SSE stream's events.
bool ParseStream(const std::string& body, bool chat, Answer* out) {
  size_t pos = 0;
  bool done = false;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) return false;
    const std::string event = body.substr(pos, end - pos);
    pos = end + 2;
    if (!event.starts_with("data: ")) return false;
    if (event == "data: [DONE]") {
      done = true;
      continue;
    }
    const json chunk = json::parse(event.substr(6), nullptr, false);
    if (chunk.is_discarded() || chunk["choices"].empty()) return false;
    const json& choice = chunk["choices"][0];
    out->text += chat ? choice["delta"].value("content", "") : choice["text"].get<std::string>();
    if (choice["finish_reason"].is_string()) out->finish_reason = choice["finish_reason"];
  }
  return done;
}

bool Generate(httplib::Client& client, int prompt, bool chat, bool stream, Answer* out,
              std::string* error = nullptr) {
  const httplib::Result res = client.Post(chat ? "/v1/chat/completions" : "/v1/completions",
                                          Body(prompt, chat, stream), "application/json");
  if (!res || res->status != 200) {
    if (error) *error = res ? res->body : "no answer: " + httplib::to_string(res.error());
    return false;
  }
  *out = {};
  if (stream) return ParseStream(res->body, chat, out);
  const json j = json::parse(res->body, nullptr, false);
  if (j.is_discarded()) return false;
  const json& choice = j["choices"][0];
  out->text =
      chat ? choice["message"]["content"].get<std::string>() : choice["text"].get<std::string>();
  out->finish_reason = choice["finish_reason"];
  return true;
}

double Percentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(q * static_cast<double>(values.size() - 1))];
}

TEST(LoadTest, ConcurrentGreedyTextEqualsAloneAndEveryPageIsFreed) {
  const int clients = EnvInt("DSCALE_LOAD_CLIENTS", 64);
  const int total = clients * EnvInt("DSCALE_LOAD_REQUESTS", 500);
  auto server = ServerProcess::Start({"--max-running", "16", "--max-queue", "256"});
  ASSERT_GT(server->port(), 0);

  // Each prompt alone, as chat and as completion.
  std::vector<Answer> alone(2 * kPrompts);
  {
    httplib::Client client("127.0.0.1", server->port());
    for (int i = 0; i < 2 * kPrompts; ++i) {
      ASSERT_TRUE(Generate(client, i / 2, i % 2 == 1, false, &alone[i])) << "prompt " << i;
    }
  }

  std::atomic<int> next{0}, failures{0}, mismatches{0};
  std::mutex mu;
  std::vector<double> latencies;
  std::string first_mismatch, first_failure;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", server->port());
      client.set_keep_alive(true);
      client.set_read_timeout(300, 0);
      std::vector<double> mine;
      for (int n = next++; n < total; n = next++) {
        const int kind = n % (2 * kPrompts);
        const bool chat = kind % 2 == 1, stream = n % 3 == 0;
        Answer got;
        const auto t0 = std::chrono::steady_clock::now();
        std::string error;
        if (!Generate(client, kind / 2, chat, stream, &got, &error)) {
          ++failures;
          std::lock_guard lock(mu);
          first_failure += std::string(chat ? "chat" : "text") + (stream ? " streamed" : "") +
                           " request " + std::to_string(n) + " from client " + std::to_string(c) +
                           ": " + error + "\n";
          continue;
        }
        mine.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        if (got != alone[kind]) {
          ++mismatches;
          std::lock_guard lock(mu);
          if (first_mismatch.empty()) {
            first_mismatch = "prompt " + std::to_string(kind / 2) + (chat ? " chat" : " text") +
                             (stream ? " streamed" : "") + ": got " + json(got.text).dump() + " (" +
                             got.finish_reason + "), alone " + json(alone[kind].text).dump();
          }
        }
      }
      std::lock_guard lock(mu);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  }
  for (std::thread& t : threads) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  EXPECT_EQ(failures.load(), 0) << first_failure;
  EXPECT_EQ(mismatches.load(), 0) << first_mismatch;
  ASSERT_FALSE(latencies.empty());
  std::printf(
      "load: %d requests from %d clients in %.1f s: %.1f requests/s, latency p50 %.1f ms, "
      "p99 %.1f ms\n",
      total, clients, seconds, total / seconds, 1e3 * Percentile(latencies, 0.5),
      1e3 * Percentile(latencies, 0.99));

  // Nothing left behind.
  httplib::Client client("127.0.0.1", server->port());
  json health;
  for (int i = 0; i < 200; ++i) {
    health = json::parse(client.Get("/health")->body);
    if (health["running"] == 0 && health["waiting"] == 0) break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(health["running"], 0);
  EXPECT_EQ(health["waiting"], 0);
  EXPECT_EQ(health["kv_pages_free"], health["kv_pages_total"]);
  const std::string metrics = client.Get("/metrics")->body;
  EXPECT_EQ(MetricValue(metrics, "dscale_kv_pages_free"),
            MetricValue(metrics, "dscale_kv_pages_total"));
  EXPECT_EQ(MetricValue(metrics, "dscale_requests_finished_total{reason=\"stop\"}") +
                MetricValue(metrics, "dscale_requests_finished_total{reason=\"length\"}"),
            total + 2 * kPrompts);
  EXPECT_EQ(MetricValue(metrics, "dscale_requests_finished_total{reason=\"cancelled\"}"), 0);
  EXPECT_EQ(MetricValue(metrics, "dscale_requests_finished_total{reason=\"error\"}"), 0);
  double step_seconds = 0;
  for (const char* stage : {"prefill", "draft", "decision", "verify", "acceptance", "commit"}) {
    step_seconds +=
        MetricValue(metrics, "dscale_step_seconds_total{stage=\"" + std::string(stage) + "\"}");
  }
  std::printf("engine: %.0f decode steps, %.1f rows/step, tau %.2f, %.1f s in steps\n",
              MetricValue(metrics, "dscale_decode_steps_total"),
              MetricValue(metrics, "dscale_verified_rows_per_step"),
              MetricValue(metrics, "dscale_tau"), step_seconds);
  EXPECT_EQ(server->Terminate(), 0);
}

}  // namespace
}  // namespace dscale::e2e
