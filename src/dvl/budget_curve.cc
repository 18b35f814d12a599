#include "dvl/budget_curve.h"

#include <algorithm>
#include <functional>

#include "core/check.h"
#include "dvl/budget_allocator.h"

namespace dscale::dvl {

void ExpectedTokensCurve(const float* q, int64_t n, int width, BudgetCurve* curve) {
  DSCALE_CHECK(n >= 1 && width >= 2);
  curve->n = n;
  curve->width = width;
  curve->tokens.assign(static_cast<size_t>((width - 1) * n + 1), 0.0);
  // The seeds' value and the two candidate lists.
  double at_seeds = 0.0;
  int64_t seed_rows = 0;
  curve->shrink.clear();
  curve->grow.clear();
  for (int64_t i = 0; i < n; ++i) {
    const float* row = q + i * width;
    const int32_t k0 = SeedLength(row, width);
    seed_rows += k0;
    for (int j = 0; j < k0; ++j) at_seeds += row[j];
    curve->shrink.insert(curve->shrink.end(), row + 1, row + k0);
    curve->grow.insert(curve->grow.end(), row + k0, row + width);
  }
  std::sort(curve->shrink.begin(), curve->shrink.end());
  std::sort(curve->grow.begin(), curve->grow.end(), std::greater<float>());

  curve->tokens[static_cast<size_t>(seed_rows - n)] = at_seeds;
  double value = at_seeds;
  for (int64_t m = seed_rows - 1, s = 0; m >= n; --m, ++s) {
    value -= curve->shrink[static_cast<size_t>(s)];
    curve->tokens[static_cast<size_t>(m - n)] = value;
  }
  value = at_seeds;
  for (int64_t m = seed_rows + 1, s = 0; m <= int64_t{width} * n; ++m, ++s) {
    value += curve->grow[static_cast<size_t>(s)];
    curve->tokens[static_cast<size_t>(m - n)] = value;
  }
}

}  // namespace dscale::dvl
