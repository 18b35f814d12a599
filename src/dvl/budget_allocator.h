#pragma once
// DVL budget allocator (paper Algorithm 1, lines 2–9 and Proposition 1).
//
// Prefix scores: q_{i,0} = 1 (the anchor is always verified) and
//   q_{i,j} = min(q_{i,j−1}, σ(predLogit_{i,j})),  j = 1..W−1,
// so each row is nonincreasing. Seeds: k_i⁽⁰⁾ = clip(⌊Σ_{j=1}^{W−1} q_{i,j} + ½⌋, 1, W), the
// sum taken in double in order j = 1..W−1. With Δ = M − Σ k_i⁽⁰⁾:
//   while Δ > 0: grow i* = argmax_{k_i < W} q_{i,k_i}     (next-slot gain)
//   while Δ < 0: shrink i* = argmin_{k_i > 1} q_{i,k_i−1}  (last-slot loss)
// Ties go to the lowest request index in both loops, so the result is a pure function of the
// scores and the budget. Each loop iteration changes Δ by one, so there are exactly |Δ₀|
// updates; for nonincreasing rows the result maximises Σ_i Σ_{j<k_i} q_{i,j} subject to
// Σ k_i = M, 1 ≤ k_i ≤ W and k ≥ k⁽⁰⁾ (growing) or k ≤ k⁽⁰⁾ (shrinking).
//
// The budget M ("M_live") is W·N/2 by default. BudgetFromFraction generalises that to
// round(fraction · W · N) clamped to [N, W·N]; any explicit budget must lie in [N, W·N].

#include <cstdint>
#include <vector>

#include "core/dvl_shapes.h"
#include "core/status.h"

namespace dscale::dvl {

inline constexpr double kDefaultVerifyBudget = 0.5;

// M = round(fraction · width · n) (half away from zero), clamped to [n, width · n].
// InvalidArgument unless n ≥ 1, width ≥ 1 and 0 < fraction ≤ 1.
Result<int64_t> BudgetFromFraction(int64_t n, int width, double fraction);

// InvalidArgument naming the range unless n ≤ budget ≤ width · n (and n ≥ 1).
Status CheckBudget(int64_t n, int width, int64_t budget);

// Prefix scores q [n, width] from predictor logits [n, width − 1]. A NaN logit scores 0 (the
// conservative choice: that position and all after it look unlikely to be accepted).
void PrefixScoresFromLogits(const float* logits, int64_t n, int width, float* q);

// Prefix scores q [n, width] from acceptance probabilities [n, width − 1] (σ already applied).
void PrefixScoresFromProbs(const float* probs, int64_t n, int width, float* q);

// k⁽⁰⁾ for one row of prefix scores q [width].
int32_t SeedLength(const float* q, int width);

// Algorithm 1 into caller-owned arrays (no allocation up to 256 requests; beyond, a heap of n
// entries keeps the whole call O(N + |Δ₀| log N)): seed [n], k [n], offsets [n + 1] with
// offsets[0] = 0 and offsets[i + 1] = offsets[i] + k[i]. q is [n, width] of nonincreasing
// rows with q[i][0] = 1. Requires CheckBudget(n, width, budget).ok(). Returns |Δ₀|, the
// number of grow/shrink updates performed.
int64_t AllocateInto(const float* q, int64_t n, int width, int64_t budget, int32_t* seed,
                     int32_t* k, int32_t* offsets);

struct Allocation {
  int64_t budget = 0;            // M, equal to Σ k
  int64_t updates = 0;           // |Δ₀|
  std::vector<int32_t> seed;     // [n] k⁽⁰⁾
  std::vector<int32_t> k;        // [n] adjusted lengths, anchor included
  std::vector<int32_t> offsets;  // [n + 1] prefix sums of k
};

// Algorithm 1 on prefix scores q [n, width]; errors for n < 1 or a budget out of range.
Result<Allocation> Allocate(const float* q, int64_t n, int width, int64_t budget);

// Convenience forms for W = 16: predictor logits [n, 15] or probabilities [n, 15].
Result<Allocation> AllocateFromLogits(const float* logits, int64_t n, int64_t budget);
Result<Allocation> AllocateFromProbs(const float* probs, int64_t n, int64_t budget);

}  // namespace dscale::dvl
