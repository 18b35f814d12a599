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
