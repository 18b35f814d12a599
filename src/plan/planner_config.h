#pragma once
// What the decision stage is built from: the parsed --spec policy, the drafter's block width and
// the policy's inputs (predictor, budget, steps-per-second table), and the one statement of which
// of them each policy needs.

#include <cstdint>

#include "budget/confidence_survival.h"
#include "budget/expert_cost_model.h"
#include "budget/sps_table.h"
#include "budget/step_time_source.h"
#include "budget/verify_budget.h"
#include "core/status.h"
#include "dvl/predictor.h"
#include "spec/length_policy.h"

namespace dscale {

// The policy's own inputs: loaded by whoever starts an engine (the CLI's runtime, the benchmark's
// models, tests), carried by EngineConfig untouched, read only by the planner.
struct PolicyInputs {
  const dvl::Predictor* predictor = nullptr;    // dscale, dspark; must outlive the planner
  budget::VerifyBudget verify_budget;           // dscale
  const budget::SpsTable* sps_table = nullptr;  // dspark; must outlive the planner
  // dspark over a drafter with a confidence head: its STS temperatures; null: uncalibrated
  // (every T = 1). Must outlive the planner.
  const budget::ConfidenceCalibration* confidence_calibration = nullptr;
};

struct PlannerConfig {
  LengthPolicy policy;
  int32_t block = 0;  // the drafter's block W; 0: no drafter
  bool drafter_confidence = false;  // the drafter's drafts carry a confidence head's logits
  PolicyInputs inputs;
  // Where auto reads its step times; null: the clock (MeasuredStepTimes). Must outlive the
  // planner.
  const budget::StepTimeSource* step_times = nullptr;
  int32_t max_running = 16;  // N at most (auto's cost-model range)
  // A sparse target's experts (budget::ExpertShapeOf): auto prices its draft rows by them.
  budget::ExpertShape experts;
  bool tile_routing = true;  // the packed batch's attention tile (TileRowsFor)
  // The engine holds the committed rows of requests that draft only at probes and appends them
  // right before they next draft (VerifyPlanner::HoldsDraftContexts; a host backend): auto then
  // keeps a context for the cost of a copy a step.
  bool held_draft_contexts = false;
};

// What each policy needs, the only place that says it (MakeLengthStrategy checks it when an
// engine is created; start-up paths that load models call it to fail before they run anything):
//   none     nothing
//   dflash   a drafter
//   fixed:K  a drafter whose block has at least K rows
//   dscale   a drafter of block 16 and the DVL predictor trained on its drafts
//   dspark   a steps-per-second table, and a drafter with a confidence head (DSpark's, ranked
//            by its calibrated survival) or else what dscale needs (ranked by the predictor)
// InvalidArgument naming the --spec value and the flag that supplies what is missing.
Status CheckPolicyInputs(const PlannerConfig& config);

}  // namespace dscale
