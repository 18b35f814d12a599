#include "dvl/budget_curve.h"

#include <algorithm>
#include <functional>

#include "core/check.h"
#include "dvl/budget_allocator.h"

namespace dscale::dvl {

void ExpectedTokensCurve(const float* q, int64_t n, int width, BudgetCurve* curve,
                         std::span<const double> row_costs) {
  DSCALE_CHECK(n >= 1 && width >= 2);
  DSCALE_CHECK(row_costs.empty() || static_cast<int>(row_costs.size()) == width);
  curve->n = n;
  curve->width = width;
  const auto points = static_cast<size_t>((width - 1) * n + 1);
  curve->tokens.assign(points, 0.0);
  // The seeds' value and cost, and the two candidate lists.
  double at_seeds = 0.0, seed_cost = 0.0;
  int64_t seed_rows = 0;
  curve->shrink.clear();
  curve->grow.clear();
  for (int64_t i = 0; i < n; ++i) {
    const float* row = q + i * width;
    const int32_t k0 = SeedLength(row, width);
    seed_rows += k0;
    for (int j = 0; j < k0; ++j) at_seeds += row[j];
    for (int32_t j = 1; j < width; ++j) {
      (j < k0 ? curve->shrink : curve->grow).emplace_back(row[j], j);
      if (j < k0 && !row_costs.empty()) seed_cost += row_costs[static_cast<size_t>(j)];
    }
  }
  // A row's slots are taken in position order among equal scores (rows are nonincreasing).
  std::sort(curve->shrink.begin(), curve->shrink.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second > b.second;
  });
  std::sort(curve->grow.begin(), curve->grow.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  const bool costs = !row_costs.empty();
  const auto cost_of = [&](int32_t j) { return row_costs[static_cast<size_t>(j)]; };
  if (costs) {
    curve->cost.assign(points, 0.0);
  } else {
    curve->cost.clear();
  }

  curve->tokens[static_cast<size_t>(seed_rows - n)] = at_seeds;
  if (costs) curve->cost[static_cast<size_t>(seed_rows - n)] = seed_cost;
  double value = at_seeds, cost = seed_cost;
  for (int64_t m = seed_rows - 1, s = 0; m >= n; --m, ++s) {
    const auto& [score, j] = curve->shrink[static_cast<size_t>(s)];
    value -= score;
    curve->tokens[static_cast<size_t>(m - n)] = value;
    if (costs) curve->cost[static_cast<size_t>(m - n)] = cost -= cost_of(j);
  }
  value = at_seeds;
  cost = seed_cost;
  for (int64_t m = seed_rows + 1, s = 0; m <= int64_t{width} * n; ++m, ++s) {
    const auto& [score, j] = curve->grow[static_cast<size_t>(s)];
    value += score;
    curve->tokens[static_cast<size_t>(m - n)] = value;
    if (costs) curve->cost[static_cast<size_t>(m - n)] = cost += cost_of(j);
  }
}

}  // namespace dscale::dvl
