#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace dscale::bench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

double Percentile(std::span<const double> values, double p) {
  if (values.empty()) return kNaN;
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * double(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - double(lo));
}

double Mean(std::span<const double> values) {
  if (values.empty()) return kNaN;
  return std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
}

double Median(std::span<const double> values) { return Percentile(values, 50.0); }

double GeoMean(std::span<const double> values) {
  if (values.empty()) return kNaN;
  double log_sum = 0;
  for (double v : values) {
    if (!(v > 0)) return kNaN;
    log_sum += std::log(v);
  }
  return std::exp(log_sum / double(values.size()));
}

Distribution Summarize(std::span<const double> values) {
  return {.mean = Mean(values),
          .p50 = Percentile(values, 50),
          .p95 = Percentile(values, 95),
          .p99 = Percentile(values, 99)};
}

double RelativeSpread(std::span<const double> values) {
  if (values.size() < 2) return 0.0;
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  const double median = Median(values);
  return median > 0 ? (*hi - *lo) / median : kNaN;
}

}  // namespace dscale::bench
