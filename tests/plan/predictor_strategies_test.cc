// The strategies that decide from the DVL predictor's scores: dscale at a fixed budget, dscale
// with the auto budget, and dspark.

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "budget/simulation.h"
#include "budget/sps_table.h"
#include "core/dvl_shapes.h"
#include "dvl/budget_allocator.h"
#include "plan/auto_budget_strategy.h"
#include "plan/dscale_strategy.h"
#include "plan/dspark_strategy.h"
#include "plan/predictor_scores.h"
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

// A block cut short where its request's output ends scores 0 past its rows, so Algorithm 1
// spends the budget on the other blocks' rows before any of those.
TEST(DScaleStrategyTest, SpendsTheBudgetOnRowsThatCanCommit) {
  const dvl::Predictor predictor = MakePredictor(3);
  for (const int32_t short_rows : {1, 2, 5}) {
    const StepBatch blocks = MakeBlocks({kW, short_rows, kW});
    const DraftOutput drafts = MakeDrafts(3, 5);
    for (const double fraction : {0.5, 0.9}) {
      DScaleStrategy strategy(predictor, fraction);
      const std::vector<int32_t> k =
          DecideAll(strategy, {.blocks = blocks, .drafts = drafts, .drafted_requests = 3});
      const int64_t budget = dvl::BudgetFromFraction(3, kW, fraction).value();
      SCOPED_TRACE(::testing::Message() << "short " << short_rows << ", fraction " << fraction);
      // Only once every scored row is taken does the budget reach rows the planner drops.
      const int64_t usable = kW + short_rows + kW;
      if (budget <= usable) {
        EXPECT_LE(k[1], short_rows);
      }
      EXPECT_EQ(k[0] + std::min(k[1], short_rows) + k[2], std::min(budget, usable));
    }
  }
}

TEST(PredictorScoresTest, ScoresZeroPastACutSpanOnly) {
  const dvl::Predictor predictor = MakePredictor(4);
  const StepBatch blocks = MakeBlocks({kW, 1, 4, kW});
  const DraftOutput drafts = MakeDrafts(3, 9);
  const std::vector<uint8_t> drafted = {1, 0, 1, 1};
  PredictorScores scores(predictor);
  scores.Compute({.blocks = blocks, .drafts = drafts, .drafted = drafted, .drafted_requests = 3});
  // Rows of q: requests 0, 2 (4 rows) and 3.
  for (int j = 0; j < kW; ++j) {
    EXPECT_GT(scores.q()[j], 0.0f) << j;
    EXPECT_EQ(scores.q()[kW + j] > 0.0f, j < 4) << j;
    EXPECT_GT(scores.q()[2 * kW + j], 0.0f) << j;
  }
}

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

// Over a confidence head the walk reads σ(l / T) products. Table: 50 steps/s up to 2 rows, 35 at
// 3, time ∝ rows past that. Uncalibrated, request 0's first draft (survival σ(8)) pays at B = 3
// (3.0 · 35 > 2 · 50) and its second does not (4.0 · 26.25 < 3.0 · 35); request 1's (σ(−8)) never
// does. A temperature of 1000 on position 1 makes the first survival ≈ 0.5: 2.5 · 35 < 100, so the
// walk stops before it.
TEST(DSparkStrategyTest, RanksByTheDraftsConfidenceHead) {
  constexpr int32_t kWidth = 4;  // γ = 3 drafts per block
  const budget::SpsTable sps{.tokens = {1, 2, 3}, .steps_per_second = {50, 50, 35}};
  const StepBatch blocks = MakeBlocks({kWidth, kWidth});
  DraftOutput drafts{.candidates = kWidth - 1};
  drafts.confidence = {8.0f, 8.0f, 8.0f, -8.0f, -8.0f, -8.0f};
  DSparkStrategy uncalibrated(budget::ConfidenceCalibration{}, sps, kWidth);
  EXPECT_EQ(DecideAll(uncalibrated, {.blocks = blocks, .drafts = drafts, .drafted_requests = 2}),
            (std::vector<int32_t>{2, 1}));
  DSparkStrategy cold(budget::ConfidenceCalibration{.temperatures = {1000.0f, 1.0f, 1.0f}}, sps,
                      kWidth);
  EXPECT_EQ(DecideAll(cold, {.blocks = blocks, .drafts = drafts, .drafted_requests = 2}),
            (std::vector<int32_t>{1, 1}));
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
