#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "bench/manifest.h"
#include "bench/stats.h"

namespace dscale::bench {
namespace {

TEST(Manifest, SameInputsGiveTheSameManifest) {
  const Manifest a = BuildManifest(10, 3, 25, 7);
  const Manifest b = BuildManifest(10, 3, 25, 7);
  EXPECT_EQ(a.warmup, b.warmup);
  EXPECT_EQ(a.measured, b.measured);
  EXPECT_NE(BuildManifest(10, 3, 25, 8).measured, a.measured);
}

TEST(Manifest, WalksOnePermutationCyclicallyWarmupFirst) {
  const Manifest m = BuildManifest(5, 2, 9, 3);
  ASSERT_EQ(m.warmup.size(), 2u);
  ASSERT_EQ(m.measured.size(), 9u);
  std::vector<int32_t> all = m.warmup;
  all.insert(all.end(), m.measured.begin(), m.measured.end());
  for (size_t i = 5; i < all.size(); ++i) EXPECT_EQ(all[i], all[i - 5]) << i;
  std::vector<int32_t> first(all.begin(), all.begin() + 5);
  std::sort(first.begin(), first.end());
  EXPECT_EQ(first, (std::vector<int32_t>{0, 1, 2, 3, 4}));
}

TEST(Manifest, PermutationIsFixedAcrossPlatforms) {
  // The generator is our own, so this exact order is part of the manifest's definition.
  const std::vector<int32_t> p = SeededPermutation(6, 0);
  std::vector<int32_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(p, SeededPermutation(6, 0));
}

// An open loop's arrivals: the same times for the same seed, nondecreasing from 0, and gaps of
// mean 1 / rate whose spread is an exponential's (standard deviation equal to the mean).
TEST(Manifest, PoissonArrivalsAreSeededAndSpacedAtTheRate) {
  const std::vector<double> t = PoissonArrivals(20000, 4.0, 3);
  ASSERT_EQ(t.size(), 20000u);
  EXPECT_EQ(t, PoissonArrivals(20000, 4.0, 3));
  EXPECT_NE(t, PoissonArrivals(20000, 4.0, 4));
  EXPECT_EQ(t[0], 0.0);
  std::vector<double> gaps;
  for (size_t i = 1; i < t.size(); ++i) gaps.push_back(t[i] - t[i - 1]);
  EXPECT_GE(*std::min_element(gaps.begin(), gaps.end()), 0.0);
  const double mean = Mean(gaps);
  double square = 0;
  for (double g : gaps) square += (g - mean) * (g - mean);
  EXPECT_NEAR(mean, 0.25, 0.25 * 0.03);
  EXPECT_NEAR(std::sqrt(square / double(gaps.size())), 0.25, 0.25 * 0.05);
  // Twice the rate, the same draws: every time halves.
  const std::vector<double> fast = PoissonArrivals(20000, 8.0, 3);
  EXPECT_NEAR(fast.back(), t.back() / 2, 1e-9 * t.back());
  EXPECT_TRUE(PoissonArrivals(0, 1.0, 0).empty());
}

TEST(Stats, PercentileInterpolatesBetweenRanks) {
  const std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile(v, 95), 3.85);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 4.0);
  EXPECT_TRUE(std::isnan(Percentile({}, 50)));
  const std::vector<double> one = {7};
  EXPECT_DOUBLE_EQ(Percentile(one, 99), 7.0);
}

TEST(Stats, SummaryMeanAndGeoMean) {
  const std::vector<double> v = {1, 2, 3, 4, 5};
  const Distribution d = Summarize(v);
  EXPECT_DOUBLE_EQ(d.mean, 3.0);
  EXPECT_DOUBLE_EQ(d.p50, 3.0);
  EXPECT_NEAR(d.p99, 4.96, 1e-12);
  const std::vector<double> g = {1, 4, 16};
  EXPECT_NEAR(GeoMean(g), 4.0, 1e-12);
  const std::vector<double> bad = {1, 0};
  EXPECT_TRUE(std::isnan(GeoMean(bad)));
}

TEST(Stats, RelativeSpread) {
  const std::vector<double> v = {90, 100, 110};
  EXPECT_NEAR(RelativeSpread(v), 0.2, 1e-12);
  const std::vector<double> one = {5};
  EXPECT_EQ(RelativeSpread(one), 0.0);
}

}  // namespace
}  // namespace dscale::bench
