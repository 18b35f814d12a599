#include "dvl/budget_allocator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>

namespace dscale::dvl {
namespace {

constexpr int kW = kBlockWidth;

// Σ_i Σ_{j<k_i} q_{i,j} in double.
double Objective(const std::vector<float>& q, const std::vector<int32_t>& k) {
  double total = 0.0;
  for (size_t i = 0; i < k.size(); ++i) {
    for (int j = 0; j < k[i]; ++j) total += q[i * kW + j];
  }
  return total;
}

// Exhaustive maximum of the objective over integer k with Σk = budget and lo ≤ k ≤ hi.
struct BruteForce {
  BruteForce(const std::vector<float>& scores, int n) : q(scores), lo(n, 1), hi(n, kW) {}

  const std::vector<float>& q;
  std::vector<int32_t> lo, hi;
  double best = -std::numeric_limits<double>::infinity();

  void Search(size_t i, int64_t remaining, double value) {
    if (i == lo.size()) {
      if (remaining == 0 && value > best) best = value;
      return;
    }
    for (int32_t k = lo[i]; k <= hi[i] && k <= remaining; ++k) {
      double row = 0.0;
      for (int j = 0; j < k; ++j) row += q[i * kW + j];
      Search(i + 1, remaining - k, value + row);
    }
  }
};

// Nonincreasing rows with q_0 = 1, with ties along a row (repeats) and across rows (values on
// a coarse grid half of the time).
std::vector<float> RandomScores(std::mt19937& rng, int n) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const bool coarse = rng() % 2 == 0;
  std::vector<float> probs(static_cast<size_t>(n) * (kW - 1));
  for (int i = 0; i < n; ++i) {
    float prev = 1.0f;
    for (int j = 0; j < kW - 1; ++j) {
      float p = unit(rng) < 0.3f ? prev : prev * std::sqrt(unit(rng));
      if (coarse) p = std::floor(p * 8.0f) / 8.0f;
      probs[i * (kW - 1) + j] = p;
      prev = p;
    }
  }
  std::vector<float> q(static_cast<size_t>(n) * kW);
  PrefixScoresFromProbs(probs.data(), n, kW, q.data());
  return q;
}

TEST(BudgetAllocatorTest, PropositionOneAgainstBruteForce) {
  std::mt19937 rng(20240611);
  int grew = 0;
  int shrank = 0;
  int kept = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 5);
    const std::vector<float> q = RandomScores(rng, n);
    // Budgets below the seed sum on even trials and above it on odd ones (both inclusive of
    // the zero gap), so both loops run often.
    int64_t seeds = 0;
    for (int i = 0; i < n; ++i) seeds += SeedLength(q.data() + i * kW, kW);
    const int64_t lo = trial % 2 == 0 ? n : seeds;
    const int64_t hi = trial % 2 == 0 ? seeds : int64_t{kW} * n;
    const int64_t budget = lo + static_cast<int64_t>(rng() % (hi - lo + 1));
    Result<Allocation> a = Allocate(q.data(), n, kW, budget);
    ASSERT_TRUE(a.ok()) << a.status().ToString();

    int64_t seed_sum = 0;
    int64_t k_sum = 0;
    for (int i = 0; i < n; ++i) {
      seed_sum += a->seed[i];
      k_sum += a->k[i];
      ASSERT_GE(a->k[i], 1);
      ASSERT_LE(a->k[i], kW);
      ASSERT_EQ(a->seed[i], SeedLength(q.data() + i * kW, kW));
      ASSERT_EQ(a->offsets[i + 1] - a->offsets[i], a->k[i]);
    }
    const int64_t delta0 = budget - seed_sum;
    ASSERT_EQ(k_sum, budget);
    ASSERT_EQ(a->offsets[0], 0);
    ASSERT_EQ(a->offsets[n], budget);
    ASSERT_EQ(a->updates, std::llabs(delta0));
    if (delta0 == 0) {
      ++kept;
      EXPECT_EQ(a->k, a->seed);
      continue;
    }
    BruteForce bf(q, n);
    for (int i = 0; i < n; ++i) {
      if (delta0 > 0) bf.lo[i] = a->seed[i];
      if (delta0 < 0) bf.hi[i] = a->seed[i];
      // The algorithm only ever moves in the direction of Δ₀.
      ASSERT_TRUE(delta0 > 0 ? a->k[i] >= a->seed[i] : a->k[i] <= a->seed[i]);
    }
    bf.Search(0, budget, 0.0);
    EXPECT_NEAR(Objective(q, a->k), bf.best, 1e-9) << "trial " << trial;
    (delta0 > 0 ? grew : shrank)++;
  }
  // The random budgets must have exercised both loops (and usually the zero gap).
  EXPECT_GT(grew, 100);
  EXPECT_GT(shrank, 100);
  EXPECT_GT(kept, 0);
}

TEST(BudgetAllocatorTest, ZeroGapKeepsSeed) {
  const std::vector<float> probs(3 * (kW - 1), 0.5f);  // q = 1, 0.5, ..., seeds ⌊7.5 + .5⌋ = 8
  Result<Allocation> a = AllocateFromProbs(probs.data(), 3, 24);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->seed, (std::vector<int32_t>{8, 8, 8}));
  EXPECT_EQ(a->k, a->seed);
  EXPECT_EQ(a->updates, 0);
}

// One request's probabilities: `ones` certain positions, then `tail`, then zeros.
void Row(std::vector<float>& probs, int ones, float tail) {
  for (int j = 0; j < kW - 1; ++j) probs.push_back(j < ones ? 1.0f : (j == ones ? tail : 0.0f));
}

TEST(BudgetAllocatorTest, PaperWorkedExampleGrowsFirstRequest) {
  // Seeds [5, 10, 7, 9] (sums 4.95, 9.6, 6.5, 8.5); R1's next slot (0.95) is the best gain.
  std::vector<float> probs;
  Row(probs, 4, 0.95f);
  Row(probs, 9, 0.6f);
  Row(probs, 6, 0.5f);
  Row(probs, 8, 0.5f);
  Result<Allocation> a = AllocateFromProbs(probs.data(), 4, 32);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->seed, (std::vector<int32_t>{5, 10, 7, 9}));
  EXPECT_EQ(a->k, (std::vector<int32_t>{6, 10, 7, 9}));
  EXPECT_EQ(a->offsets, (std::vector<int32_t>{0, 6, 16, 23, 32}));
  EXPECT_EQ(a->updates, 1);
}

TEST(BudgetAllocatorTest, ShrinkRemovesLowestLastSlot) {
  // Seeds [11, 6, 13] (sums 11.25, 6, 13.125) against budget 26: R2's two 0.25 tail slots go
  // first, then R1's 0.75 slots (below R3's 0.875 and R2's next loss of 1).
  std::vector<float> probs(kW - 1, 0.75f);
  Row(probs, 3, 0.25f);
  for (int j = 4; j < kW - 1; ++j) probs[(kW - 1) + j] = 0.25f;
  probs.insert(probs.end(), kW - 1, 0.875f);
  Result<Allocation> a = AllocateFromProbs(probs.data(), 3, 26);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->seed, (std::vector<int32_t>{11, 6, 13}));
  EXPECT_EQ(a->k, (std::vector<int32_t>{9, 4, 13}));
  EXPECT_EQ(a->offsets, (std::vector<int32_t>{0, 9, 13, 26}));
  EXPECT_EQ(a->updates, 4);
}

TEST(BudgetAllocatorTest, TiesGoToLowestRequestIndex) {
  const std::vector<float> probs(3 * (kW - 1), 0.1f);  // every score 0.1, seeds 2
  Result<Allocation> grow = AllocateFromProbs(probs.data(), 3, 8);
  ASSERT_TRUE(grow.ok());
  EXPECT_EQ(grow->k, (std::vector<int32_t>{4, 2, 2}));
  Result<Allocation> shrink = AllocateFromProbs(probs.data(), 3, 4);
  ASSERT_TRUE(shrink.ok());
  EXPECT_EQ(shrink->k, (std::vector<int32_t>{1, 1, 2}));
}

// Algorithm 1 as the paper states it, one O(N) scan per update: the reference for the heap the
// allocator uses beyond 256 requests.
std::vector<int32_t> ScanAllocate(const std::vector<float>& q, int64_t n, int64_t budget) {
  std::vector<int32_t> k(static_cast<size_t>(n));
  int64_t delta = budget;
  for (int64_t i = 0; i < n; ++i) {
    k[i] = SeedLength(q.data() + i * kW, kW);
    delta -= k[i];
  }
  for (; delta != 0; delta += delta > 0 ? -1 : 1) {
    int64_t best = -1;
    for (int64_t i = 0; i < n; ++i) {
      const bool grow = delta > 0;
      if (grow ? k[i] >= kW : k[i] <= 1) continue;
      const float score = q[i * kW + (grow ? k[i] : k[i] - 1)];
      const float best_score = best < 0 ? 0.0f : q[best * kW + (grow ? k[best] : k[best] - 1)];
      if (best < 0 || (grow ? score > best_score : score < best_score)) best = i;
    }
    k[best] += delta > 0 ? 1 : -1;
  }
  return k;
}

TEST(BudgetAllocatorTest, ManyRequestsGiveTheScanResultExactly) {
  std::mt19937 rng(11);
  for (const int n : {257, 300, 1000, 2000}) {
    const std::vector<float> q = RandomScores(rng, n);
    for (const int64_t budget :
         {int64_t{n}, int64_t{n} * 3, int64_t{n} * kW / 2, int64_t{n} * kW - 5, int64_t{n} * kW}) {
      Result<Allocation> a = Allocate(q.data(), n, kW, budget);
      ASSERT_TRUE(a.ok());
      EXPECT_EQ(a->k, ScanAllocate(q, n, budget)) << "n=" << n << " budget=" << budget;
    }
  }
  // Every score equal: ties all the way, to the lowest indices.
  const std::vector<float> probs(300 * (kW - 1), 0.1f);
  std::vector<float> flat(300 * kW);
  PrefixScoresFromProbs(probs.data(), 300, kW, flat.data());
  for (const int64_t budget : {int64_t{300}, int64_t{700}, int64_t{2000}}) {
    Result<Allocation> a = Allocate(flat.data(), 300, kW, budget);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->k, ScanAllocate(flat, 300, budget)) << budget;
  }
}

TEST(BudgetAllocatorTest, PrefixScoresAreCumulativeMinimaOfSigmoids) {
  std::vector<float> logits(kW - 1, 0.0f);
  logits[0] = 2.0f;
  logits[1] = 3.0f;  // higher than its predecessor: capped by the cumulative minimum
  logits[2] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> q(kW);
  PrefixScoresFromLogits(logits.data(), 1, kW, q.data());
  EXPECT_EQ(q[0], 1.0f);
  EXPECT_FLOAT_EQ(q[1], 1.0f / (1.0f + std::exp(-2.0f)));
  EXPECT_EQ(q[2], q[1]);
  EXPECT_EQ(q[3], 0.0f);  // NaN scores 0 and everything after it too
  for (int j = 4; j < kW; ++j) EXPECT_EQ(q[j], 0.0f);
}

TEST(BudgetAllocatorTest, SeedRoundsHalfUpAndClips) {
  std::vector<float> q(kW, 0.0f);
  q[0] = 1.0f;
  EXPECT_EQ(SeedLength(q.data(), kW), 1);  // Σ = 0 → clipped up to 1
  for (int j = 1; j < kW; ++j) q[j] = 1.0f;
  EXPECT_EQ(SeedLength(q.data(), kW), 15);  // Σ = 15
  q.assign(kW, 0.0f);
  q[0] = q[1] = q[2] = 1.0f;
  q[3] = 0.5f;
  EXPECT_EQ(SeedLength(q.data(), kW), 3);  // ⌊2.5 + .5⌋ = 3
  q[3] = 0.49f;
  EXPECT_EQ(SeedLength(q.data(), kW), 2);
}

TEST(BudgetAllocatorTest, BudgetFromFraction) {
  EXPECT_EQ(BudgetFromFraction(4, kW, 0.5).value(), 32);
  EXPECT_EQ(BudgetFromFraction(3, kW, 0.3).value(), 14);  // 14.4
  EXPECT_EQ(BudgetFromFraction(2, kW, 0.01).value(), 2);  // clamped up to N
  EXPECT_EQ(BudgetFromFraction(5, kW, 1.0).value(), 80);
  EXPECT_FALSE(BudgetFromFraction(0, kW, 0.5).ok());
  EXPECT_FALSE(BudgetFromFraction(4, kW, 0.0).ok());
  EXPECT_FALSE(BudgetFromFraction(4, kW, 1.5).ok());
  EXPECT_FALSE(BudgetFromFraction(4, kW, std::nan("")).ok());
}

TEST(BudgetAllocatorTest, RejectsBudgetOutsideRange) {
  const std::vector<float> probs(2 * (kW - 1), 0.5f);
  Result<Allocation> low = AllocateFromProbs(probs.data(), 2, 1);
  ASSERT_FALSE(low.ok());
  EXPECT_EQ(low.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(low.status().message().find("[2, 32]"), std::string::npos);
  EXPECT_FALSE(AllocateFromProbs(probs.data(), 2, 33).ok());
  EXPECT_TRUE(AllocateFromProbs(probs.data(), 2, 2).ok());
  EXPECT_TRUE(AllocateFromProbs(probs.data(), 2, 32).ok());
}

TEST(BudgetAllocatorTest, ExtremeBudgetsGiveAllOnesOrFullWidth) {
  std::mt19937 rng(7);
  const std::vector<float> q = RandomScores(rng, 5);
  Result<Allocation> low = Allocate(q.data(), 5, kW, 5);
  Result<Allocation> high = Allocate(q.data(), 5, kW, 80);
  ASSERT_TRUE(low.ok() && high.ok());
  EXPECT_EQ(low->k, std::vector<int32_t>(5, 1));
  EXPECT_EQ(high->k, std::vector<int32_t>(5, kW));
}

}  // namespace
}  // namespace dscale::dvl
