#pragma once
// The one place a parsed --spec value becomes its LengthStrategy (length_strategy.h), with the
// checks each policy's inputs need.

#include <memory>

#include "core/status.h"
#include "plan/length_strategy.h"
#include "plan/planner_config.h"

namespace dscale {

// The bucket width every policy plans for: W, at least 2 (a block of 1 without a drafter).
int32_t PlanWidth(const PlannerConfig& config);

// InvalidArgument when dscale or dspark lack the predictor or a block of W = 16, when dspark
// lacks its steps-per-second table, or when max_running < 1.
Result<std::unique_ptr<LengthStrategy>> MakeLengthStrategy(const PlannerConfig& config);

}  // namespace dscale
