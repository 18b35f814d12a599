#include "dvl/budget_curve.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "dvl/budget_allocator.h"

namespace dscale::dvl {
namespace {

// Nonincreasing rows with q_0 = 1 of width `w`, with runs of equal values (ties along a row)
// and, half of the time, values on a coarse grid (ties across rows).
std::vector<float> RandomScores(std::mt19937& rng, int64_t n, int w) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const bool coarse = rng() % 2 == 0;
  std::vector<float> probs(static_cast<size_t>(n) * (w - 1));
  for (int64_t i = 0; i < n; ++i) {
    float prev = unit(rng) < 0.2f ? 1.0f : unit(rng);
    for (int j = 0; j < w - 1; ++j) {
      float p = unit(rng) < 0.3f ? prev : prev * std::sqrt(unit(rng));
      if (coarse) p = std::floor(p * 8.0f) / 8.0f;
      probs[i * (w - 1) + j] = p;
      prev = p;
    }
  }
  std::vector<float> q(static_cast<size_t>(n) * w);
  PrefixScoresFromProbs(probs.data(), n, w, q.data());
  return q;
}

// Σ_i Σ_{j<k_i} q_{i,j} of the allocator's own result for budget m.
double AllocatorValue(const std::vector<float>& q, int64_t n, int w, int64_t m) {
  Result<Allocation> a = Allocate(q.data(), n, w, m);
  EXPECT_TRUE(a.ok());
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int j = 0; j < a->k[static_cast<size_t>(i)]; ++j) total += q[i * w + j];
  }
  return total;
}

// Σ_i Σ_{1≤j<k_i} cost[j] of the allocator's own result for budget m.
double AllocatorCost(const std::vector<float>& q, int64_t n, int w, int64_t m,
                     const std::vector<double>& cost) {
  Result<Allocation> a = Allocate(q.data(), n, w, m);
  EXPECT_TRUE(a.ok());
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int j = 1; j < a->k[static_cast<size_t>(i)]; ++j) total += cost[static_cast<size_t>(j)];
  }
  return total;
}

// With row costs, the curve's cost at every budget is what Algorithm 1's allocation for it
// costs (scores distinct across rows, so the allocation is the only one of its value).
TEST(BudgetCurveTest, CostIsTheAllocationsRowCostAtEveryBudget) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(0.05f, 0.95f);
  BudgetCurve curve;
  std::vector<double> cost(kBlockWidth);
  for (int j = 1; j < kBlockWidth; ++j) cost[static_cast<size_t>(j)] = 8.0 / (1 + 0.3 * j);
  for (int trial = 0; trial < 100; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 9);
    std::vector<float> probs(static_cast<size_t>(n) * (kBlockWidth - 1));
    for (int64_t i = 0; i < n; ++i) {
      float p = 1;
      for (int j = 0; j < kBlockWidth - 1; ++j) probs[i * (kBlockWidth - 1) + j] = p *= unit(rng);
    }
    std::vector<float> q(static_cast<size_t>(n) * kBlockWidth);
    PrefixScoresFromProbs(probs.data(), n, kBlockWidth, q.data());
    ExpectedTokensCurve(q.data(), n, kBlockWidth, &curve, cost);
    ASSERT_EQ(curve.cost.size(), curve.tokens.size());
    for (int64_t m = n; m <= kBlockWidth * n; ++m) {
      ASSERT_NEAR(curve.CostAt(m), AllocatorCost(q, n, kBlockWidth, m, cost), 1e-9 * double(m))
          << "trial " << trial << " n " << n << " M " << m;
    }
    ExpectedTokensCurve(q.data(), n, kBlockWidth, &curve);
    EXPECT_TRUE(curve.cost.empty());
    EXPECT_EQ(curve.CostAt(n + 1), 0.0);
  }
}

// The curve is Algorithm 1's value at every budget, on random cases of both widths the engine
// and the tests use, budgets above, at and below the seed sum included.
TEST(BudgetCurveTest, EqualsTheAllocatorAtEveryBudget) {
  std::mt19937 rng(7);
  BudgetCurve curve;
  for (int trial = 0; trial < 300; ++trial) {
    const int w = trial % 3 == 0 ? 4 : kBlockWidth;
    const int64_t n = 1 + static_cast<int64_t>(rng() % (trial % 5 == 0 ? 40 : 6));
    const std::vector<float> q = RandomScores(rng, n, w);
    ExpectedTokensCurve(q.data(), n, w, &curve);
    ASSERT_EQ(curve.min_rows(), n);
    ASSERT_EQ(curve.max_rows(), w * n);
    ASSERT_EQ(curve.tokens.size(), static_cast<size_t>((w - 1) * n + 1));
    for (int64_t m = n; m <= w * n; ++m) {
      ASSERT_NEAR(curve.At(m), AllocatorValue(q, n, w, m), 1e-9 * double(m))
          << "trial " << trial << " n " << n << " M " << m;
    }
  }
}

// Nondecreasing, each row worth at most 1, and concave on each side of the seed sum S₀ (rows
// grown in descending and shrunk in ascending score order). Across S₀ it need not be: a seed
// can hold a low score while another request's next score is higher.
TEST(BudgetCurveTest, IsNondecreasingAndConcaveOnEachSideOfTheSeeds) {
  std::mt19937 rng(11);
  BudgetCurve curve;
  for (int trial = 0; trial < 100; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 12);
    const std::vector<float> q = RandomScores(rng, n, kBlockWidth);
    ExpectedTokensCurve(q.data(), n, kBlockWidth, &curve);
    int64_t seeds = 0;
    for (int64_t i = 0; i < n; ++i) seeds += SeedLength(q.data() + i * kBlockWidth, kBlockWidth);
    EXPECT_NEAR(curve.At(n), double(n), 1e-9);
    for (int64_t m = n + 1; m <= curve.max_rows(); ++m) {
      const double gain = curve.At(m) - curve.At(m - 1);
      ASSERT_GE(gain, -1e-9);
      ASSERT_LE(gain, 1.0 + 1e-9);
      if (m - 1 > n && m - 1 != seeds) {
        ASSERT_LE(gain, curve.At(m - 1) - curve.At(m - 2) + 1e-9)
            << "trial " << trial << " M " << m;
      }
    }
  }
}

TEST(BudgetCurveTest, CertainDraftsAreWorthOneTokenEach) {
  // Two requests: all 15 drafts certain, and none: E(M) = M up to 16 + 1, then flat.
  std::vector<float> probs(2 * 15, 0.0f);
  for (int j = 0; j < 15; ++j) probs[j] = 1.0f;
  std::vector<float> q(2 * kBlockWidth);
  PrefixScoresFromProbs(probs.data(), 2, kBlockWidth, q.data());
  BudgetCurve curve;
  ExpectedTokensCurve(q.data(), 2, kBlockWidth, &curve);
  for (int64_t m = 2; m <= 32; ++m) EXPECT_DOUBLE_EQ(curve.At(m), std::min<double>(m, 17));
}

}  // namespace
}  // namespace dscale::dvl
