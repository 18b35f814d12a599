#include "bench/request_loop.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <string>
#include <thread>
#include <unordered_map>

#include "core/check.h"

namespace dscale::bench {

uint64_t HashTokens(std::span<const int32_t> ids, uint64_t seed) {
  uint64_t h = seed;
  for (const int32_t id : ids) {
    auto bits = static_cast<uint32_t>(id);
    for (int byte = 0; byte < 4; ++byte, bits >>= 8) {
      h ^= bits & 0xffu;
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

uint64_t OutputsDigest(std::span<const uint64_t> request_hashes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const uint64_t r : request_hashes) {
    const std::array<int32_t, 2> halves = {static_cast<int32_t>(r), static_cast<int32_t>(r >> 32)};
    h = HashTokens(halves, h);
  }
  return h;
}

namespace {

Clock::duration SecondsToDuration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

Result<LoopOutcome> RunEngineLoop(Engine& engine, std::span<const LoopRequest> requests,
                                  const LoopShape& shape, const GenerationParams& params,
                                  const std::function<void()>& on_done) {
  DSCALE_CHECK(shape.concurrency >= 1);
  DSCALE_CHECK(shape.arrivals.empty() || shape.arrivals.size() == requests.size());
  const bool open = !shape.arrivals.empty();
  LoopOutcome outcome;
  outcome.output_hashes.assign(requests.size(), 0);
  std::unordered_map<RequestId, size_t> manifest_index;
  size_t next = 0;
  int32_t in_flight = 0;
  const Clock::time_point start = Clock::now();
  auto arrival = [&](size_t i) { return start + SecondsToDuration(shape.arrivals[i]); };
  // Whether the next request may be sent now: one is left, a worker is free and it has arrived.
  auto sendable = [&] {
    return next < requests.size() && in_flight < shape.concurrency &&
           (!open || arrival(next) <= Clock::now());
  };
  auto submit = [&]() -> Status {
    GenerationParams p = params;
    p.sampling.seed = requests[next].seed;
    Result<RequestId> id = engine.Submit(requests[next].prompt, std::move(p));
    if (!id.ok()) return id.status().WithContext("request " + std::to_string(next + 1));
    manifest_index[*id] = next;
    ++next;
    ++in_flight;
    return Status::Ok();
  };
  while (next < requests.size() || in_flight > 0) {
    while (sendable()) DSCALE_RETURN_IF_ERROR(submit());
    if (in_flight == 0) {  // open loop, idle until the next arrival
      std::this_thread::sleep_until(arrival(next));
      continue;
    }
    const int64_t steps_before = engine.stats().decode_steps;
    DSCALE_ASSIGN_OR_RETURN(bool worked, engine.Step());
    if (!worked) return Status(StatusCode::kInternal, "engine idle with requests in flight");
    if (engine.stats().decode_steps != steps_before) {
      outcome.steps.push_back({.t = SecondsBetween(start, Clock::now()),
                               .rows = engine.stats().last_step_rows,
                               .requests = engine.stats().last_step_requests});
    }
    for (const RequestResult& r : engine.TakeFinished()) {
      const size_t index = manifest_index.at(r.id);
      const Clock::time_point sent = open ? arrival(index) : r.submitted;
      outcome.samples.push_back({.latency_s = SecondsBetween(sent, r.finished),
                                 .ttft_s = SecondsBetween(sent, r.first_token),
                                 .output_tokens = static_cast<int64_t>(r.output_ids.size())});
      outcome.output_hashes[index] = HashTokens(r.output_ids);
      --in_flight;
      if (on_done) on_done();
    }
  }
  outcome.window_s = SecondsBetween(start, Clock::now());
  return outcome;
}

std::vector<BudgetWindow> RowsOverTime(std::span<const StepPoint> steps, double window_s,
                                       int windows) {
  std::vector<BudgetWindow> out;
  if (windows < 1 || !(window_s > 0)) return out;
  std::vector<double> rows(windows, 0), requests(windows, 0), count(windows, 0);
  for (const StepPoint& p : steps) {
    const int w = std::clamp(static_cast<int>(p.t / window_s * windows), 0, windows - 1);
    rows[w] += p.rows;
    requests[w] += p.requests;
    ++count[w];
  }
  for (int w = 0; w < windows; ++w) {
    if (count[w] == 0) continue;
    out.push_back({.end_s = window_s * (w + 1) / windows,
                   .rows_per_step = rows[w] / count[w],
                   .requests_per_step = requests[w] / count[w]});
  }
  return out;
}

RunMetrics InProcessMetrics(const LoopOutcome& outcome, const StepStats& s) {
  RunMetrics m = MetricsFrom(outcome.samples, outcome.window_s);
  m.outputs_digest = OutputsDigest(outcome.output_hashes);
  m.tau = s.tau();
  m.rows_per_step = s.rows_per_step();
  if (s.decode_request_steps > 0) {
    m.rows_per_request = double(s.verified_rows) / double(s.decode_request_steps);
  }
  if (s.prefix_query_tokens > 0) {
    m.prefix_hit_rate = double(s.prefix_hit_tokens) / double(s.prefix_query_tokens);
  }
  m.rows_over_time = RowsOverTime(outcome.steps, outcome.window_s, /*windows=*/10);
  m.stages = StageTimes{.decode_steps = s.decode_steps,
                        .prefill_s = s.prefill_s,
                        .draft_s = s.draft_s,
                        .decision_s = s.decision_s,
                        .verify_s = s.verify_s,
                        .acceptance_s = s.acceptance_s,
                        .commit_s = s.commit_s,
                        .verify_experts_per_layer = s.verify_experts_per_layer,
                        .expert_counted_steps = s.expert_counted_steps,
                        .prefill_rows = s.prefill_rows,
                        .mixed_prefill_rows = s.mixed_prefill_rows};
  return m;
}

}  // namespace dscale::bench
