#pragma once
// Pearson's chi-square goodness of fit with an approximate p-value, for sampling tests.

#include <cmath>
#include <cstdint>
#include <vector>

namespace dscale::testing {

// Upper-tail p-value of a chi-square statistic with `dof` degrees of freedom, by the
// Wilson–Hilferty cube-root normal approximation (accurate to ~1e-3 for dof ≥ 3, ample for a
// p > 0.001 acceptance test).
inline double ChiSquarePValue(double statistic, int dof) {
  const double k = dof;
  const double z = (std::cbrt(statistic / k) - (1.0 - 2.0 / (9.0 * k))) / std::sqrt(2.0 / (9.0 * k));
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

struct ChiSquareResult {
  double statistic = 0;
  int dof = 0;
  double p_value = 1;
};

// Observed counts against expected probabilities over the same cells. Cells expecting fewer
// than 5 observations are pooled into one cell so the approximation holds.
inline ChiSquareResult ChiSquareTest(const std::vector<int64_t>& observed,
                                     const std::vector<double>& probs) {
  int64_t total = 0;
  for (int64_t o : observed) total += o;
  ChiSquareResult r;
  double pooled_expected = 0, pooled_observed = 0;
  int cells = 0;
  for (size_t i = 0; i < observed.size(); ++i) {
    const double expected = probs[i] * static_cast<double>(total);
    if (expected < 5) {
      pooled_expected += expected;
      pooled_observed += static_cast<double>(observed[i]);
      continue;
    }
    r.statistic += (observed[i] - expected) * (observed[i] - expected) / expected;
    ++cells;
  }
  if (pooled_expected > 0) {
    r.statistic += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) /
                   std::max(pooled_expected, 1e-9);
    ++cells;
  }
  r.dof = std::max(1, cells - 1);
  r.p_value = ChiSquarePValue(r.statistic, r.dof);
  return r;
}

}  // namespace dscale::testing
