#pragma once
// Server metrics and their rendering in the Prometheus text exposition format (version 0.0.4).
// The engine thread and the HTTP threads fill a MetricsSnapshot; /metrics renders a copy.
//
// Exposed (all prefixed dscale_):
//   http_requests_total{path,code}        responses by route and status
//   requests_finished_total{reason}       stop, length, cancelled, error
//   prompt_tokens_total, generation_tokens_total
//   requests_waiting, requests_running, request_slots (gauges: queue depth, running, bound)
//   kv_pages_free, kv_pages_total         (gauges)
//   prefix_cache_states                   (gauge: a hybrid target's recurrent states kept for
//                                         reused prefixes)
//   decode_steps_total, verified_rows_total, committed_tokens_total, prefill_rows_total,
//   mixed_prefill_rows_total              (of the prompt rows, those run in a verify's pass)
//   prompt_wait_steps_total               (steps a lone prompt waited for company, MoE)
//   verified_rows_per_step, tau           (gauges: means since start)
//   verify_experts_per_layer              (a mixture of experts: mean distinct experts a verify
//                                         woke per sparse layer)
//   accepted_length                       histogram of drafts accepted per request-step
//   step_seconds_total{stage}             prefill, draft, decision, verify, acceptance, commit
//   time_to_first_token_seconds, request_duration_seconds (histograms)
//   verify_budget_rows, verify_budget_requests, verify_budget_fraction (gauges: latest step)
//   auto_budget_*, auto_cost_*             --verify-budget auto: mode, gain, calibration, step
//                                         counts, the step-cost model's fitted parameters and, on
//                                         a mixture of experts, the expert model's
//   draining                              1 after SIGTERM

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/step_stats.h"

namespace dscale::server {

// Counts observations below fixed upper bounds (the last bucket is +Inf).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double x);

  const std::vector<double>& bounds() const { return bounds_; }
  const std::vector<int64_t>& counts() const { return counts_; }  // [bounds + 1], not cumulative
  double sum() const { return sum_; }
  int64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;
  double sum_ = 0;
  int64_t count_ = 0;
};

// Latency buckets in seconds, 5 ms to 2 minutes.
std::vector<double> LatencyBuckets();

enum class Outcome { kStop, kLength, kCancelled, kError };
inline constexpr int kOutcomes = 4;
const char* OutcomeName(Outcome outcome);

// What the engine thread keeps (copied from the engine after each step).
struct EngineMetrics {
  StepStats stats;
  int32_t block_size = 1;  // W: accepted lengths run 0..W−1
  int32_t waiting = 0;     // accepted by the server, not yet running
  int32_t running = 0;
  int32_t request_slots = 0;  // running + waiting at most (beyond: 503)
  int32_t free_kv_pages = 0;
  int32_t total_kv_pages = 0;
  int32_t prefix_cache_states = 0;  // a hybrid target's recurrent states the prefix cache keeps
  int64_t finished[kOutcomes] = {};
  int64_t prompt_tokens = 0;
  int64_t generation_tokens = 0;
  Histogram time_to_first_token{LatencyBuckets()};
  Histogram request_duration{LatencyBuckets()};
};

struct MetricsSnapshot {
  EngineMetrics engine;
  // Kept by the HTTP side.
  std::map<std::pair<std::string, int>, int64_t> http_responses;  // (path, status) → count
  bool draining = false;
  int32_t open_connections = 0;  // held by the server now
  int32_t max_connections = 0;   // beyond: 503 at once
};

std::string RenderPrometheus(const MetricsSnapshot& m);

}  // namespace dscale::server
