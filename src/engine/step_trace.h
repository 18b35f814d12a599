#pragma once
// A step trace: one JSON object per line for every decode step, written as the step ends, so
// a run shows step by step what the planner chose and what it cost — how many requests drafted,
// the rows they verified, where the step's time went and, under --verify-budget auto, the
// controller's mode, the fleet gain its latest drafted step measured, the smoothed gain that
// decides, and the exploration loss against its budget (docs/VERIFY_BUDGET.md).
//
// A line (times in milliseconds; "auto" only under --verify-budget auto, "experts" only on a
// mixture of experts):
//   {"step": 12, "t_ms": 1834.2, "requests": 4, "fed": 4, "drafted": 4, "rows": 12,
//    "committed": 9, "prompt_rows": 0, "draft_ms": 61.0, "decide_ms": 0.6, "verify_ms": 198.3,
//    "accept_ms": 0.2, "commit_ms": 0.1, "feed_ms": 0.4, "experts": 31.2,
//    "auto": {"mode": "speculate", "cold_start": false, "best_rows": 12,
//             "verify_predicted_ms": 191.0, "committed_predicted": 8.6, "step_gain": 1.04,
//             "gain": 1.02, "loss_s": 0.41, "budget_s": 0.95, "calibration": 0.97}}
// t_ms: from the trace's opening to the step's end. committed: tokens the step committed.
// best_rows, verify_predicted_ms, committed_predicted (drafted steps only): the controller's M*,
// and the verify time and committed tokens it predicted for the rows it chose ("rows": M* unless
// a ramp, probe or exploration step moved it), against the step's measured "verify_ms" (plus
// "accept_ms" and "commit_ms", which its cost model counts with the verify; prompt rows riding
// in the pass are not predicted) and "committed". step_gain: 0 on a step whose gain was not
// computed (a plain step, an exploration step).

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "budget/auto_budget.h"
#include "core/status.h"
#include "engine/decode_step.h"

namespace dscale {

struct StepTraceLine {
  int64_t step = 0;
  int32_t requests = 0;  // N, decoding this step
  int32_t fed = 0;       // of them, with a draft context
  int32_t drafted = 0;
  int64_t rows = 0;  // verified rows, anchors included
  int64_t committed = 0;
  int64_t prompt_rows = 0;  // mixed prefill: prompt rows in the verify pass
  StageSeconds seconds;
  std::optional<double> experts_per_layer;  // a mixture of experts: distinct experts of the pass
  std::optional<budget::AutoBudgetSnapshot> auto_budget;
};

// The line's JSON text (no newline); t_ms as given.
std::string StepTraceJson(const StepTraceLine& line, double t_ms);

class StepTrace {
 public:
  // Creates (truncates) `path`; the error names it.
  static Result<std::unique_ptr<StepTrace>> Open(const std::string& path);
  ~StepTrace();
  StepTrace(const StepTrace&) = delete;
  StepTrace& operator=(const StepTrace&) = delete;

  // Writes the line (flushed, so a trace of a server that is killed stays whole to its last step).
  void Write(const StepTraceLine& line);
  const std::string& path() const { return path_; }

 private:
  StepTrace(std::FILE* file, std::string path);
  std::FILE* file_;
  std::string path_;
  std::chrono::steady_clock::time_point opened_;
};

}  // namespace dscale
