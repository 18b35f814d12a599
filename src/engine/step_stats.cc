#include "engine/step_stats.h"

namespace dscale {

StepStats StepStats::Since(const StepStats& before) const {
  StepStats d = *this;
  d.decode_steps -= before.decode_steps;
  d.decode_request_steps -= before.decode_request_steps;
  d.verified_rows -= before.verified_rows;
  d.committed_tokens -= before.committed_tokens;
  d.prefill_rows -= before.prefill_rows;
  d.mixed_prefill_rows -= before.mixed_prefill_rows;
  d.prompt_wait_steps -= before.prompt_wait_steps;
  d.prefix_query_tokens -= before.prefix_query_tokens;
  d.prefix_hit_tokens -= before.prefix_hit_tokens;
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
  d.verify_experts_per_layer -= before.verify_experts_per_layer;
  d.expert_counted_steps -= before.expert_counted_steps;
  return d;
}

}  // namespace dscale
