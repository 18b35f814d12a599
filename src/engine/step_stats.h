#pragma once
// Counters and the step-time breakdown the engine keeps (benchmarks and /metrics read them).

#include <array>
#include <cstdint>
#include <optional>

#include "budget/auto_budget.h"

namespace dscale {

struct StepStats {
  int64_t decode_steps = 0;
  int64_t decode_request_steps = 0;  // Σ over steps of requests verified (N)
  int64_t verified_rows = 0;         // Σ k_i
  int64_t committed_tokens = 0;      // Σ (a_i + 1) over verify steps
  int64_t prefill_rows = 0;
  int64_t mixed_prefill_rows = 0;  // of prefill_rows, those that ran in a decode step's verify
  // Decode steps in which pending prompts waited for another to share their pass (a mixture of
  // experts, EngineConfig::prompt_wait_steps).
  int64_t prompt_wait_steps = 0;
  // Prefix caching: prompt tokens of admitted requests, and those whose K/V came from the cache.
  int64_t prefix_query_tokens = 0;
  int64_t prefix_hit_tokens = 0;
  int64_t output_tokens = 0;
  int32_t last_step_requests = 0;                // N of the latest decode step
  int32_t last_step_rows = 0;                    // Σ k_i of the latest decode step
  std::array<int64_t, 65> accepted_histogram{};  // request-steps by drafts accepted (0..64)
  // --verify-budget auto: its mode, latest choice and step-cost model after the latest step.
  std::optional<budget::AutoBudgetSnapshot> auto_budget;

  // Seconds spent in each stage of the step pipeline.
  double prefill_s = 0;
  double draft_s = 0;
  double decision_s = 0;
  double verify_s = 0;
  double acceptance_s = 0;
  double commit_s = 0;
  // A mixture of experts: Σ over the decode steps whose verify pass ran no prompt rows
  // (expert_counted_steps of them) of the distinct experts a sparse layer of the pass ran
  // (their mean over the sparse layers); what a verify's rows cost there.
  double verify_experts_per_layer = 0;
  int64_t expert_counted_steps = 0;

  // τ: mean tokens committed per request per verify step (accepted drafts + the new token).
  double tau() const {
    return decode_request_steps ? double(committed_tokens) / double(decode_request_steps) : 0.0;
  }
  double rows_per_step() const {
    return decode_steps ? double(verified_rows) / double(decode_steps) : 0.0;
  }
  double decode_step_s() const { return draft_s + decision_s + verify_s + acceptance_s + commit_s; }

  // What was counted since `before` (a copy of these stats taken earlier): every counter and
  // stage time less its value then; the latest step's fields and the auto snapshot as they are.
  // A counter or stage time added above is subtracted there too.
  StepStats Since(const StepStats& before) const;
};

}  // namespace dscale
