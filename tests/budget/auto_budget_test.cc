#include "budget/auto_budget.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "budget/simulation.h"
#include "dvl/budget_allocator.h"

namespace dscale::budget {
namespace {

constexpr int kW = 16;

dvl::BudgetCurve RandomCurve(std::mt19937& rng, int64_t n) {
  std::uniform_real_distribution<float> unit(0.02f, 0.98f);
  std::vector<float> probs(static_cast<size_t>(n) * (kW - 1));
  for (int64_t i = 0; i < n; ++i) {
    float p = 1;
    for (int j = 0; j < kW - 1; ++j) probs[i * (kW - 1) + j] = p *= std::sqrt(unit(rng));
  }
  std::vector<float> q(static_cast<size_t>(n) * kW);
  dvl::PrefixScoresFromProbs(probs.data(), n, kW, q.data());
  dvl::BudgetCurve curve;
  dvl::ExpectedTokensCurve(q.data(), n, kW, &curve);
  return curve;
}

// Step-time shapes: linear (a CPU), roofline (a GPU: flat until the compute knee), stepped
// (tile quantisation).
std::vector<std::function<double(int64_t)>> PlantedCosts() {
  return {[](int64_t m) { return 2e-3 + 3e-4 * double(m); },
          [](int64_t m) { return std::max(20e-3, 20e-3 * double(m) / 90); },
          [](int64_t m) { return 1e-3 + 4e-3 * std::ceil(double(m) / 48); }};
}

TEST(AutoBudgetTest, BestRowsMaximisesTokensPerSecondOnPlantedCurves) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 24);
    const dvl::BudgetCurve curve = RandomCurve(rng, n);
    const int64_t other = static_cast<int64_t>(rng() % 5);
    for (const auto& cost : PlantedCosts()) {
      const auto seconds = [&](int64_t m) { return 1e-3 + cost(other + m); };
      const int64_t best = BestRows(curve, other, 1.0, seconds);
      const double best_rate = ExpectedTokens(curve, best, other, 1.0) / seconds(best);
      for (int64_t m = n; m <= kW * n; ++m) {
        const double rate = ExpectedTokens(curve, m, other, 1.0) / seconds(m);
        ASSERT_LE(rate, best_rate) << "trial " << trial << " M " << m << " best " << best;
        if (m < best) {
          ASSERT_LT(rate, best_rate) << "ties go to the smaller M";
        }
      }
    }
  }
}

// On a roofline whose knee sits at W·N/2 rows, and scores strictly between 0 and 1, rows are
// free up to the knee and cost more than they return after it: M* = W·N/2 exactly.
TEST(AutoBudgetTest, RooflineWithKneeAtHalfTheBlockGivesThePapersBudget) {
  std::mt19937 rng(5);
  for (int64_t n : {1, 4, 16, 32}) {
    const dvl::BudgetCurve curve = RandomCurve(rng, n);
    const double knee = kW * n / 2.0;
    const auto seconds = [&](int64_t m) { return std::max(10e-3, 10e-3 * double(m) / knee); };
    EXPECT_EQ(BestRows(curve, 0, 1.0, seconds), kW * n / 2) << "n " << n;
  }
}

TEST(AutoBudgetTest, ColdStartVisitsThePapersBudgetFirstThenSeveralRowCounts) {
  std::mt19937 rng(6);
  AutoBudget controller;
  const dvl::BudgetCurve curve = RandomCurve(rng, 8);
  std::vector<int64_t> rows;
  for (int i = 0; i < 4; ++i) {
    rows.push_back(controller.ChooseRows(curve, 0, 1e-3));
    controller.Record({.requests = 8,
                       .drafted = 8,
                       .rows = rows.back(),
                       .draft_s = 1e-3,
                       .verify_s = 1e-3 + 1e-5 * double(rows.back())},
                      8);
  }
  EXPECT_EQ(rows, (std::vector<int64_t>{64, 8, 128, 32}));
  EXPECT_EQ(controller.model().verify().observed_bins(), 4);
  EXPECT_EQ(controller.Snapshot().gain, 0) << "cold steps do not score the gain";
  EXPECT_EQ(controller.mode(), AutoMode::kSpeculate);
}

TEST(AutoBudgetTest, CalibrationFollowsTheTokensActuallyCommitted) {
  std::mt19937 rng(8);
  AutoBudget controller({.cold_fractions = {}});
  for (int i = 0; i < 60; ++i) {
    const dvl::BudgetCurve curve = RandomCurve(rng, 8);
    const int64_t m = controller.ChooseRows(curve, 0, 1e-3);
    const double extra = curve.At(m) - 8;  // the predictor promised this many drafts; half came
    controller.Record({.requests = 8, .drafted = 8, .rows = m, .draft_s = 1e-3, .verify_s = 2e-3},
                      8 + std::llround(0.5 * extra));
  }
  EXPECT_NEAR(controller.Snapshot().calibration, 0.5, 0.1);
}

SimulatedPair GpuLike() { return GpuShapedPair(128); }  // knee at W·N/2 for N = 16
SimulatedPair CpuLike() { return CpuShapedPair(); }

// Median over drafted steps from `from` on of the rows per drafted request (W/2 = 8: the paper's).
double MedianRowsPerDraftedRequest(const SimulationResult& r, size_t from) {
  std::vector<double> rows;
  for (size_t i = from; i < r.steps.size(); ++i) {
    if (r.steps[i].drafted > 0)
      rows.push_back(double(r.steps[i].drafted_rows) / r.steps[i].drafted);
  }
  if (rows.empty()) return 0;
  std::nth_element(rows.begin(), rows.begin() + rows.size() / 2, rows.end());
  return rows[rows.size() / 2];
}

TEST(AutoBudgetTest, ConvergesNearHalfTheBlockOnAGpuShapedCurve) {
  AutoBudget controller;
  const SimulationOptions options{.concurrency = 16, .steps = 400, .seed = 11};
  const SimulationResult run = Simulate(GpuLike(), {}, options, &controller);
  EXPECT_EQ(controller.mode(), AutoMode::kSpeculate);
  const double m = MedianRowsPerDraftedRequest(run, 100);
  EXPECT_GE(m, 0.85 * 8);
  EXPECT_LE(m, 1.1 * 8);
  const SimulationResult paper =
      Simulate(GpuLike(), {.kind = SimulatedPolicy::kFraction, .fraction = 0.5}, options, nullptr);
  const SimulationResult plain =
      Simulate(GpuLike(), {.kind = SimulatedPolicy::kPlain}, options, nullptr);
  EXPECT_GE(run.tokens_per_second, 0.97 * paper.tokens_per_second);
  EXPECT_GT(run.tokens_per_second, 1.5 * plain.tokens_per_second);
}

TEST(AutoBudgetTest, SettlesOnPlainDecodingWhenSpeculationCostsMoreThanItReturns) {
  for (int32_t c : {1, 4, 16}) {
    AutoBudget controller;
    const SimulationOptions options{.concurrency = c, .steps = 4000, .seed = 12};
    const SimulationResult run = Simulate(CpuLike(), {}, options, &controller);
    EXPECT_EQ(controller.mode(), AutoMode::kPlain) << "c " << c;
    // Bounded: plain within the cold steps and a few more drafted steps.
    size_t first_plain = run.steps.size();
    for (size_t i = 0; i < run.steps.size(); ++i) {
      if (run.steps[i].mode == AutoMode::kPlain) {
        first_plain = i;
        break;
      }
    }
    EXPECT_LE(first_plain, 12u) << "c " << c;
    const SimulationResult plain =
        Simulate(CpuLike(), {.kind = SimulatedPolicy::kPlain}, options, nullptr);
    EXPECT_GE(run.tokens_per_second, 0.97 * plain.tokens_per_second) << "c " << c;
  }
}

TEST(AutoBudgetTest, ProbesFindTheirWayBackWhenSpeculationStartsToPay) {
  AutoBudget controller;
  Simulate(CpuLike(), {}, {.concurrency = 16, .steps = 600, .seed = 13}, &controller);
  ASSERT_EQ(controller.mode(), AutoMode::kPlain);
  const SimulationResult later =
      Simulate(GpuLike(), {}, {.concurrency = 16, .steps = 1500, .seed = 14}, &controller);
  EXPECT_EQ(controller.mode(), AutoMode::kSpeculate);
  EXPECT_GE(MedianRowsPerDraftedRequest(later, 1200), 0.85 * 8);
}

}  // namespace
}  // namespace dscale::budget
