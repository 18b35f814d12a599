#include "plan/make_length_strategy.h"

#include <algorithm>
#include <string>

#include "core/check.h"
#include "core/dvl_shapes.h"
#include "plan/auto_budget_strategy.h"
#include "plan/dscale_strategy.h"
#include "plan/dspark_strategy.h"
#include "plan/fixed_rows_strategy.h"
#include "plan/plain_strategy.h"
#include "plan/whole_block_strategy.h"

namespace dscale {
namespace {

Status CheckInputs(const PlannerConfig& config) {
  const std::string spec = "--spec " + config.policy.Name();
  if (config.policy.UsesPredictor()) {
    if (config.predictor == nullptr) return InvalidArgument(spec + " needs --predictor");
    if (config.block != dvl::kBlockWidth) {
      return InvalidArgument(spec + " needs a drafter with block size " +
                             std::to_string(dvl::kBlockWidth) + ", got " +
                             std::to_string(config.block));
    }
  }
  if (config.policy.mode == SpecMode::kDSpark && config.sps_table == nullptr) {
    return InvalidArgument(spec +
                           " needs a steps-per-second table (profiled at start-up, or "
                           "--sps-table FILE)");
  }
  if (config.max_running < 1) return InvalidArgument("max_running: must be at least 1");
  return Status::Ok();
}

std::unique_ptr<LengthStrategy> MakeDScale(const PlannerConfig& config, int32_t width) {
  if (config.verify_budget.automatic) {
    return std::make_unique<AutoBudgetStrategy>(
        *config.predictor, width, config.max_running,
        config.step_times != nullptr ? *config.step_times : budget::ClockStepTimes());
  }
  return std::make_unique<DScaleStrategy>(*config.predictor, config.verify_budget.fraction);
}

// The only switch over the policies.
std::unique_ptr<LengthStrategy> NewStrategy(const PlannerConfig& config, int32_t width) {
  switch (config.policy.mode) {
    case SpecMode::kNone:
      return std::make_unique<PlainStrategy>();
    case SpecMode::kDFlash:
      return std::make_unique<WholeBlockStrategy>(width);
    case SpecMode::kFixed:
      return std::make_unique<FixedRowsStrategy>(config.policy.fixed_rows);
    case SpecMode::kDScale:
      return MakeDScale(config, width);
    case SpecMode::kDSpark:
      return std::make_unique<DSparkStrategy>(*config.predictor, *config.sps_table, width);
  }
  DSCALE_CHECK_MSG(false, "unknown --spec mode");
}

}  // namespace

int32_t PlanWidth(const PlannerConfig& config) { return std::max(config.block, 2); }

Result<std::unique_ptr<LengthStrategy>> MakeLengthStrategy(const PlannerConfig& config) {
  DSCALE_RETURN_IF_ERROR(CheckInputs(config));
  return NewStrategy(config, PlanWidth(config));
}

}  // namespace dscale
