#include "plan/auto_budget_strategy.h"

#include <gtest/gtest.h>

#include <vector>

#include "budget/simulation.h"
#include "core/dvl_shapes.h"
#include "strategy_test_util.h"

namespace dscale {
namespace {

using plan_test::DecideAll;
using plan_test::MakeBlocks;
using plan_test::MakeDrafts;
using plan_test::MakePredictor;

constexpr int32_t kW = dvl::kBlockWidth;

TEST(AutoBudgetStrategyTest, DraftedRequestsGetOneToWRowsOthersTheirAnchor) {
  const dvl::Predictor predictor = MakePredictor(5);
  const budget::SimulatedPair gpu = budget::GpuShapedPair(/*knee_rows=*/32);
  const budget::PlantedStepTimes planted(gpu);
  AutoBudgetStrategy strategy(predictor, kW, /*max_requests=*/8, planted);
  const StepBatch blocks = MakeBlocks({kW, 1, kW, kW});
  const DraftOutput drafts = MakeDrafts(3, 17);
  const std::vector<uint8_t> drafted = {1, 0, 1, 1};
  for (int step = 0; step < 4; ++step) {
    const std::vector<int32_t> k = DecideAll(
        strategy, {.blocks = blocks, .drafts = drafts, .drafted = drafted, .drafted_requests = 3});
    EXPECT_EQ(k[1], 1) << "step " << step;
    for (const size_t i : {0, 2, 3}) {
      EXPECT_GE(k[i], 1) << "step " << step;
      EXPECT_LE(k[i], kW) << "step " << step;
    }
  }
  EXPECT_TRUE(strategy.AutoSnapshot().has_value());
  EXPECT_DOUBLE_EQ(strategy.CapacityFraction(kW), 1.0);
}

TEST(AutoBudgetStrategyTest, APlainStepKeepsEveryAnchor) {
  const dvl::Predictor predictor = MakePredictor(5);
  AutoBudgetStrategy strategy(predictor, kW, /*max_requests=*/8, budget::ClockStepTimes());
  const StepBatch blocks = MakeBlocks({1, 1});
  const DraftOutput none;
  const std::vector<uint8_t> drafted = {0, 0};
  EXPECT_EQ(
      DecideAll(strategy,
                {.blocks = blocks, .drafts = none, .drafted = drafted, .drafted_requests = 0}),
      (std::vector<int32_t>{1, 1}));
}

}  // namespace
}  // namespace dscale
