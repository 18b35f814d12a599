#pragma once
// What the decision stage is built from: the parsed --spec policy, the drafter's block width and
// the policy's inputs (predictor, budget, steps-per-second table).

#include <cstdint>

#include "budget/sps_table.h"
#include "budget/step_time_source.h"
#include "budget/verify_budget.h"
#include "dvl/predictor.h"
#include "spec/length_policy.h"

namespace dscale {

struct PlannerConfig {
  LengthPolicy policy;
  int32_t block = 1;                            // W (1 without a drafter)
  const dvl::Predictor* predictor = nullptr;    // dscale, dspark; must outlive the planner
  budget::VerifyBudget verify_budget;           // dscale
  const budget::SpsTable* sps_table = nullptr;  // dspark; must outlive the planner
  // Where auto reads its step times; null: the clock (MeasuredStepTimes). Must outlive the
  // planner.
  const budget::StepTimeSource* step_times = nullptr;
  int32_t max_running = 16;  // N at most (auto's cost-model range)
  bool tile_routing = true;  // the packed batch's attention tile (TileRowsFor)
};

}  // namespace dscale
