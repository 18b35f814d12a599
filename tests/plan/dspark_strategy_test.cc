#include "plan/dspark_strategy.h"

#include <gtest/gtest.h>

#include <vector>

#include "budget/sps_table.h"
#include "core/dvl_shapes.h"
#include "strategy_test_util.h"

namespace dscale {
namespace {

using plan_test::DecideAll;
using plan_test::MakeBlocks;
using plan_test::MakeDrafts;
using plan_test::MakePredictor;

constexpr int32_t kW = dvl::kBlockWidth;

TEST(DSparkStrategyTest, EveryRequestGetsOneToWRows) {
  const dvl::Predictor predictor = MakePredictor(7);
  // Flat up to 24 rows, then time grows with the rows: the walk stops somewhere in between.
  const budget::SpsTable sps{.tokens = {1, 24, 256}, .steps_per_second = {50, 50, 5}};
  DSparkStrategy strategy(predictor, sps, kW);
  const int32_t n = 5;
  const StepBatch blocks = MakeBlocks(std::vector<int32_t>(n, kW));
  const DraftOutput drafts = MakeDrafts(n, 23);
  const std::vector<int32_t> k =
      DecideAll(strategy, {.blocks = blocks, .drafts = drafts, .drafted_requests = n});
  ASSERT_EQ(k.size(), size_t{n});
  for (const int32_t ki : k) {
    EXPECT_GE(ki, 1);
    EXPECT_LE(ki, kW);
  }
  EXPECT_DOUBLE_EQ(strategy.CapacityFraction(kW), 1.0);
}

}  // namespace
}  // namespace dscale
