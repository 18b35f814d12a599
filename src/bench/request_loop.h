#pragma once
// The in-process request loop, closed or open. The engine is single-threaded, so c client
// workers are simulated by keeping at most c requests in flight. Closed (no arrival times): when
// a request finishes (seen after a Step), its worker submits the next request of the manifest at
// once, until the manifest is exhausted; then the outstanding requests drain. Open (an arrival
// time per request, manifest order): a request is submitted once its arrival time has passed
// and fewer than c are in flight, checked between steps; with none in flight the loop sleeps
// until the next arrival. Latency = finished − submitted and time to first token = first token
// − submitted (the engine stamps both), where "submitted" is the arrival time in an open loop:
// the time a request waited for a free worker counts, as its user would count it.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "bench/report.h"
#include "core/status.h"
#include "engine/engine.h"
#include "engine/step_stats.h"

namespace dscale::bench {

struct LoopRequest {
  std::vector<int32_t> prompt;  // token ids, chat template applied
  uint64_t seed = 0;            // sampling seed (matched across modes)
};

// One decode step of the loop: when it ended and what it verified.
struct StepPoint {
  double t = 0;  // seconds since the loop's start
  int32_t rows = 0;
  int32_t requests = 0;
};

struct LoopOutcome {
  std::vector<RequestSample> samples;  // in finishing order
  std::vector<StepPoint> steps;        // every decode step, in order
  double window_s = 0;                 // first submission (or arrival) to last finish
  // FNV-1a 64 of each request's output ids, in manifest order: two runs that generated the
  // same tokens for every request have equal vectors.
  std::vector<uint64_t> output_hashes;
};

// FNV-1a 64 over the ids' little-endian bytes, chained from `seed`.
uint64_t HashTokens(std::span<const int32_t> ids, uint64_t seed = 0xcbf29ce484222325ull);
// One value for a whole run: the per-request hashes chained in order.
uint64_t OutputsDigest(std::span<const uint64_t> request_hashes);

// How requests reach the loop: at most `concurrency` in flight, and `arrivals` (seconds from the
// loop's start, nondecreasing, one per request; empty: a closed loop) when each may be sent.
struct LoopShape {
  int32_t concurrency = 1;
  std::span<const double> arrivals;
};

// Runs `requests` through `engine` shaped by `shape`. `params` gives max_tokens, sampling and stop
// ids; each request's seed replaces params.sampling.seed. `on_done` (may be empty) is called once
// per finished request.
Result<LoopOutcome> RunEngineLoop(Engine& engine, std::span<const LoopRequest> requests,
                                  const LoopShape& shape, const GenerationParams& params,
                                  const std::function<void()>& on_done);

// The loop's decode steps in `windows` equal stretches of [0, window_s] (empty stretches left out).
std::vector<BudgetWindow> RowsOverTime(std::span<const StepPoint> steps, double window_s,
                                       int windows);

// A measured window's metrics with the engine's counters over the same window.
RunMetrics InProcessMetrics(const LoopOutcome& outcome, const StepStats& window_stats);

}  // namespace dscale::bench
