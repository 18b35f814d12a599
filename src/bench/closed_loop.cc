#include "bench/closed_loop.h"

#include <chrono>
#include <string>

namespace dscale::bench {
namespace {

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

Result<LoopOutcome> RunClosedLoop(Engine& engine, std::span<const LoopRequest> requests,
                                  int32_t concurrency, const GenerationParams& params,
                                  const std::function<void()>& on_done) {
  LoopOutcome outcome;
  size_t next = 0;
  int32_t in_flight = 0;
  auto submit = [&]() -> Status {
    GenerationParams p = params;
    p.sampling.seed = requests[next].seed;
    Result<RequestId> id = engine.Submit(requests[next].prompt, std::move(p));
    if (!id.ok()) return id.status().WithContext("request " + std::to_string(next + 1));
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
