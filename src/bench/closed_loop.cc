#include "bench/closed_loop.h"

#include <array>
#include <chrono>
#include <string>
#include <unordered_map>

namespace dscale::bench {
namespace {

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

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

Result<LoopOutcome> RunClosedLoop(Engine& engine, std::span<const LoopRequest> requests,
                                  int32_t concurrency, const GenerationParams& params,
                                  const std::function<void()>& on_done) {
  LoopOutcome outcome;
  outcome.output_hashes.assign(requests.size(), 0);
  std::unordered_map<RequestId, size_t> manifest_index;
  size_t next = 0;
  int32_t in_flight = 0;
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
  const Clock::time_point start = Clock::now();
  while (next < requests.size() && in_flight < concurrency) DSCALE_RETURN_IF_ERROR(submit());
  while (in_flight > 0) {
    DSCALE_ASSIGN_OR_RETURN(bool worked, engine.Step());
    if (!worked) return Status(StatusCode::kInternal, "engine idle with requests in flight");
    for (const RequestResult& r : engine.TakeFinished()) {
      outcome.samples.push_back({.latency_s = Seconds(r.submitted, r.finished),
                                 .ttft_s = Seconds(r.submitted, r.first_token),
                                 .output_tokens = static_cast<int64_t>(r.output_ids.size())});
      outcome.output_hashes[manifest_index.at(r.id)] = HashTokens(r.output_ids);
      --in_flight;
      if (on_done) on_done();
      if (next < requests.size()) DSCALE_RETURN_IF_ERROR(submit());
    }
  }
  outcome.window_s = Seconds(start, Clock::now());
  return outcome;
}

StepStats StatsDelta(const StepStats& after, const StepStats& before) {
  StepStats d = after;
  d.decode_steps -= before.decode_steps;
  d.decode_request_steps -= before.decode_request_steps;
  d.verified_rows -= before.verified_rows;
  d.committed_tokens -= before.committed_tokens;
  d.prefill_rows -= before.prefill_rows;
  d.output_tokens -= before.output_tokens;
  for (size_t i = 0; i < d.accepted_histogram.size(); ++i) {
    d.accepted_histogram[i] -= before.accepted_histogram[i];
  }
  d.prefill_s -= before.prefill_s;
  d.draft_s -= before.draft_s;
  d.decision_s -= before.decision_s;
  d.verify_s -= before.verify_s;
  d.acceptance_s -= before.acceptance_s;
  d.commit_s -= before.commit_s;
  return d;
}

RunMetrics InProcessMetrics(const LoopOutcome& outcome, const StepStats& s) {
  RunMetrics m = MetricsFrom(outcome.samples, outcome.window_s);
  m.outputs_digest = OutputsDigest(outcome.output_hashes);
  m.tau = s.tau();
  m.rows_per_step = s.rows_per_step();
  m.stages = StageTimes{.decode_steps = s.decode_steps,
                        .prefill_s = s.prefill_s,
                        .draft_s = s.draft_s,
                        .decision_s = s.decision_s,
                        .verify_s = s.verify_s,
                        .acceptance_s = s.acceptance_s,
                        .commit_s = s.commit_s};
  return m;
}

}  // namespace dscale::bench
