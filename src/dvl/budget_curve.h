#pragma once
// Expected committed tokens of Algorithm 1's allocation for every budget at once.
//
// For prefix scores q [n, width] (nonincreasing rows, q_{i,0} = 1), the allocator's lengths
// k(M) for budget M give E(M) = Σ_i Σ_{j<k_i(M)} q_{i,j}: the expected tokens the step commits
// (accepted drafts + the token after them) if q_{i,j} is the probability that draft j survives.
// From the seeds k⁽⁰⁾ (S₀ = Σ k⁽⁰⁾) the allocator only ever grows (M > S₀) or only shrinks
// (M < S₀), one slot per update, and the allocation for M ± 1 is the allocation for M plus one
// more update. Growing takes the largest next slot, and because rows are nonincreasing the
// slots grown are the rows' unverified scores in globally descending order; shrinking drops the
// rows' verified non-anchor scores in ascending order. So E over every M is S₀'s value plus
// prefix sums of one sorted list — no allocator run per M (Proposition 1 says each of these
// allocations is the best split for its M given the seeds).

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace dscale::dvl {

// Caller-owned scratch and result, reused across steps.
struct BudgetCurve {
  int64_t n = 0;               // requests
  int width = 0;               // W
  std::vector<double> tokens;  // [(W − 1)·n + 1]: tokens[M − n] = E(M) for M = n .. W·n
  // [(W − 1)·n + 1] or empty: with row costs c, cost[M − n] = Σ_i Σ_{1≤j<k_i(M)} c[j], what the
  // draft rows of M's allocation cost (a mixture of experts: the experts they add to their
  // requests' own, budget/expert_cost_model.h)
  std::vector<double> cost;
  // scratch: (score, position in its row) of the verified non-anchor slots, ascending, and of the
  // unverified ones, descending
  std::vector<std::pair<float, int32_t>> shrink, grow;

  int64_t min_rows() const { return n; }
  int64_t max_rows() const { return static_cast<int64_t>(width) * n; }
  double At(int64_t rows) const { return tokens[static_cast<size_t>(rows - n)]; }
  double CostAt(int64_t rows) const {
    return cost.empty() ? 0.0 : cost[static_cast<size_t>(rows - n)];
  }
};

// Fills `curve` for prefix scores q [n, width]; n ≥ 1, width ≥ 2. Sums are in double. With
// `row_costs` ([width]: the cost of a request's row at each position; position 0, the anchor,
// is never counted), curve->cost too; without, it is left empty.
void ExpectedTokensCurve(const float* q, int64_t n, int width, BudgetCurve* curve,
                         std::span<const double> row_costs = {});

}  // namespace dscale::dvl
