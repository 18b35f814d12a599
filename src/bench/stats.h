#pragma once
// Summary statistics for benchmark samples.

#include <span>
#include <vector>

namespace dscale::bench {

// The p-th percentile (0..100) with linear interpolation between closest ranks (numpy's
// default). NaN for no values.
double Percentile(std::span<const double> values, double p);
double Mean(std::span<const double> values);    // NaN for no values
double Median(std::span<const double> values);  // NaN for no values
// exp(mean(log x)). NaN when empty or when a value is not positive.
double GeoMean(std::span<const double> values);

struct Distribution {
  double mean = 0, p50 = 0, p95 = 0, p99 = 0;
};
Distribution Summarize(std::span<const double> values);

// (max − min) / median: the relative spread of repeated measurements; 0 for one value.
double RelativeSpread(std::span<const double> values);

}  // namespace dscale::bench
