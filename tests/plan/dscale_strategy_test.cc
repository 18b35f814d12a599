#include "plan/dscale_strategy.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "core/dvl_shapes.h"
#include "dvl/budget_allocator.h"
#include "strategy_test_util.h"

namespace dscale {
namespace {

using plan_test::DecideAll;
using plan_test::MakeBlocks;
using plan_test::MakeDrafts;
using plan_test::MakePredictor;

constexpr int32_t kW = dvl::kBlockWidth;

TEST(DScaleStrategyTest, SpendsExactlyTheBudget) {
  const dvl::Predictor predictor = MakePredictor(3);
  for (const double fraction : {0.25, 0.5, 0.8}) {
    for (const int32_t n : {1, 3, 7}) {
      const StepBatch blocks = MakeBlocks(std::vector<int32_t>(n, kW));
      const DraftOutput drafts = MakeDrafts(n, 11 + n);
      DScaleStrategy strategy(predictor, fraction);
      const std::vector<int32_t> k =
          DecideAll(strategy, {.blocks = blocks, .drafts = drafts, .drafted_requests = n});
      const int64_t budget = dvl::BudgetFromFraction(n, kW, fraction).value();
      EXPECT_EQ(std::accumulate(k.begin(), k.end(), int64_t{0}), budget)
          << "fraction " << fraction << ", n " << n;
      for (const int32_t ki : k) {
        EXPECT_GE(ki, 1);
        EXPECT_LE(ki, kW);
      }
      EXPECT_DOUBLE_EQ(strategy.CapacityFraction(kW), fraction);
    }
  }
}

TEST(DScaleStrategyTest, RefusesAShortBlock) {
  const dvl::Predictor predictor = MakePredictor(3);
  const StepBatch blocks = MakeBlocks({kW, 1});
  const DraftOutput drafts = MakeDrafts(2, 5);
  DScaleStrategy strategy(predictor, 0.5);
  std::vector<int32_t> k(2, 1);
  const Status status =
      strategy.Decide({.blocks = blocks, .drafts = drafts, .drafted_requests = 2}, k);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("every block must hold W = 16 rows, got 1"), std::string::npos);
}

}  // namespace
}  // namespace dscale
