#include "plan/make_length_strategy.h"

#include <algorithm>
#include <mutex>
#include <set>
#include <string>

#include "core/check.h"
#include "core/dvl_shapes.h"
#include "core/log.h"
#include "plan/auto_budget_strategy.h"
#include "plan/dscale_strategy.h"
#include "plan/dspark_strategy.h"
#include "plan/fixed_rows_strategy.h"
#include "plan/plain_strategy.h"
#include "plan/whole_block_strategy.h"

namespace dscale {
namespace {

std::unique_ptr<LengthStrategy> MakeDScale(const PlannerConfig& config, int32_t width) {
  if (config.inputs.verify_budget.automatic) {
    return std::make_unique<AutoBudgetStrategy>(
        *config.inputs.predictor, width, config.max_running,
        config.step_times != nullptr ? *config.step_times : budget::ClockStepTimes(),
        config.inputs.verify_budget.price_experts ? config.experts : budget::ExpertShape{},
        config.held_draft_contexts);
  }
  return std::make_unique<DScaleStrategy>(*config.inputs.predictor,
                                          config.inputs.verify_budget.fraction);
}

// Says `line` the first time this process makes a dspark strategy that ranks this way (bench
// makes one engine per cell: the line would otherwise repeat for every cell).
void SayOnce(const std::string& line) {
  static std::mutex mutex;
  static std::set<std::string> said;
  const std::lock_guard<std::mutex> lock(mutex);
  if (said.insert(line).second) {
    DSCALE_LOG(kInfo) << line;
  }
}

// dspark's survival: the drafter's confidence head where it has one, else the predictor; said,
// since the two rank differently.
std::unique_ptr<LengthStrategy> MakeDSpark(const PlannerConfig& config, int32_t width) {
  const budget::SpsTable& sps = *config.inputs.sps_table;
  if (!config.drafter_confidence) {
    SayOnce("--spec dspark ranks drafts by the DVL predictor (the drafter has no confidence head)");
    return std::make_unique<DSparkStrategy>(*config.inputs.predictor, sps, width);
  }
  const budget::ConfidenceCalibration* calibration = config.inputs.confidence_calibration;
  SayOnce(std::string("--spec dspark ranks drafts by the drafter's confidence head, ") +
          (calibration != nullptr && !calibration->temperatures.empty()
               ? "calibrated (sequential temperature scaling)"
               : "uncalibrated (no confidence_calibration.json)"));
  return std::make_unique<DSparkStrategy>(
      calibration != nullptr ? *calibration : budget::ConfidenceCalibration{}, sps, width);
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
      return MakeDSpark(config, width);
  }
  DSCALE_CHECK_MSG(false, "unknown --spec mode");
}

}  // namespace

Status CheckPolicyInputs(const PlannerConfig& config) {
  const LengthPolicy& policy = config.policy;
  const std::string spec = "--spec " + policy.Name();
  if (!policy.UsesDrafter()) return Status::Ok();
  if (config.block < 1) return InvalidArgument(spec + " needs --drafter");
  if (policy.mode == SpecMode::kFixed && policy.fixed_rows > config.block) {
    return InvalidArgument(spec + ": the drafter's block has only " + std::to_string(config.block) +
                           " rows");
  }
  const bool ranks_by_head = policy.RanksByConfidenceHead() && config.drafter_confidence;
  if (policy.UsesPredictor() && !ranks_by_head) {
    if (config.block != dvl::kBlockWidth) {
      return InvalidArgument(spec + " needs a drafter with block size " +
                             std::to_string(dvl::kBlockWidth) + ", got " +
                             std::to_string(config.block));
    }
    if (config.inputs.predictor == nullptr) return InvalidArgument(spec + " needs --predictor");
  }
  if (policy.UsesSpsTable() && config.inputs.sps_table == nullptr) {
    return InvalidArgument(spec +
                           " needs a steps-per-second table (profiled at start-up, or "
                           "--sps-table FILE)");
  }
  return Status::Ok();
}

int32_t PlanWidth(const PlannerConfig& config) { return std::max(config.block, 2); }

Result<std::unique_ptr<LengthStrategy>> MakeLengthStrategy(const PlannerConfig& config) {
  DSCALE_RETURN_IF_ERROR(CheckPolicyInputs(config));
  if (config.max_running < 1) return InvalidArgument("max_running: must be at least 1");
  return NewStrategy(config, PlanWidth(config));
}

}  // namespace dscale
