#include "budget/cost_curve.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

namespace dscale::budget {
namespace {

using Truth = std::function<double(double)>;

// `count` timings at x uniform in [lo, hi]: truth × lognormal(σ = 5%), and 5% of them × 3 (a
// step slowed by other work on the machine).
void Feed(CostCurve& curve, const Truth& truth, int64_t lo, int64_t hi, int count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> x(lo, hi);
  std::normal_distribution<double> noise(0.0, 0.05);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int i = 0; i < count; ++i) {
    const int64_t v = x(rng);
    double y = truth(double(v)) * std::exp(noise(rng));
    if (unit(rng) < 0.05) y *= 3;
    curve.Add(v, y);
  }
}

// The recovery tests spread thousands of timings over hundreds of row counts: every one stays
// fresh (the engine visits a few bins densely instead, and ages samples out after 1024).
constexpr CostCurveOptions kKeepAll{.max_age = 1 << 20};

// Worst relative error over x in [lo, hi], skipping x for which `skip` holds.
double WorstError(const CostCurve& curve, const Truth& truth, int64_t lo, int64_t hi,
                  const std::function<bool(int64_t)>& skip = nullptr) {
  double worst = 0;
  for (int64_t x = lo; x <= hi; ++x) {
    if (skip && skip(x)) continue;
    worst = std::max(worst, std::abs(curve.Predict(double(x)) / truth(double(x)) - 1));
  }
  return worst;
}

TEST(CostCurveTest, RecoversALinearCurveFromNoisyTimings) {
  const Truth linear = [](double x) { return 2e-3 + 1e-4 * x; };
  CostCurve curve(kKeepAll);
  Feed(curve, linear, 1, 512, 6000, 1);
  EXPECT_LT(WorstError(curve, linear, 1, 512), 0.06);
  const RooflineFit& fit = curve.fit();
  EXPECT_NEAR(fit(100.0), linear(100.0), 0.05 * linear(100.0));
  EXPECT_NEAR(fit(500.0), linear(500.0), 0.05 * linear(500.0));
}

TEST(CostCurveTest, RecoversARooflineAndItsKnee) {
  // Memory-bound (flat, 10 ms) until 160 rows, then compute-bound (62.5 µs per row).
  const Truth roofline = [](double x) { return std::max(10e-3 + 1e-6 * x, 62.5e-6 * x); };
  CostCurve curve(kKeepAll);
  Feed(curve, roofline, 1, 1023, 8000, 2);
  EXPECT_LT(WorstError(curve, roofline, 1, 1023), 0.06);
  const RooflineFit& fit = curve.fit();
  EXPECT_NEAR(fit.a, 10e-3, 1e-3);
  EXPECT_NEAR(fit.c, 62.5e-6, 5e-6);
  EXPECT_NEAR(fit.knee(), 163, 16);
}

TEST(CostCurveTest, RecoversAStepCurveAwayFromItsSteps) {
  // Tile quantisation: 1 ms + 1.5 ms per started tile of 64 rows.
  const Truth stepped = [](double x) { return 1e-3 + 1.5e-3 * std::ceil(x / 64); };
  CostCurve curve(kKeepAll);
  Feed(curve, stepped, 1, 512, 8000, 3);
  // Bins are one row wide up to 128 and 2-3% wide beyond, so only the bins holding a step
  // (and interpolation into them) can miss.
  const auto near_step = [](int64_t x) {
    const int64_t r = x % 64;
    return x > 128 ? (r < 8 || r > 60) : (r == 0 || r == 1);
  };
  EXPECT_LT(WorstError(curve, stepped, 1, 512, near_step), 0.06);
  for (int64_t x = 2; x <= 512; ++x) {
    ASSERT_GE(curve.Predict(double(x)), curve.Predict(double(x - 1)));  // never decreasing
  }
}

TEST(CostCurveTest, ExtrapolatesWithTheRooflineFit) {
  const Truth roofline = [](double x) { return std::max(10e-3, 62.5e-6 * x); };
  CostCurve curve(kKeepAll);
  Feed(curve, roofline, 1, 400, 4000, 4);
  EXPECT_NEAR(curve.Predict(1000), roofline(1000), 0.1 * roofline(1000));
  const Truth linear = [](double x) { return 1e-3 + 2e-4 * x; };
  CostCurve left(kKeepAll);
  Feed(left, linear, 32, 128, 2000, 5);
  EXPECT_NEAR(left.Predict(256), linear(256), 0.1 * linear(256));
  EXPECT_NEAR(left.Predict(8), linear(8), 0.1 * linear(8));
}

TEST(CostCurveTest, FollowsTheLatestTimingsInBoundedMemory) {
  CostCurve curve;
  for (int i = 0; i < 100000; ++i) curve.Add(1 + i % 64, 1e-3);
  EXPECT_NEAR(curve.Predict(32), 1e-3, 1e-9);
  // The machine gets slower: kRing new samples per bin replace the old ones entirely.
  for (int i = 0; i < CostCurve::kRing * 64; ++i) curve.Add(1 + i % 64, 2e-3);
  EXPECT_NEAR(curve.Predict(32), 2e-3, 1e-9);
  EXPECT_EQ(curve.samples(), 100000 + CostCurve::kRing * 64);
  EXPECT_EQ(curve.observed_bins(), 64);
}

// A region no longer visited stops pinning the curve after max_age samples: the machine got
// twice as fast, only rows 1..16 are timed again, and beyond them the fit takes over.
TEST(CostCurveTest, ForgetsRegionsNotVisitedForMaxAgeSamples) {
  CostCurve curve({.max_age = 1024});
  for (int i = 0; i < 2000; ++i) curve.Add(1 + i % 128, 2e-3 * (1 + (i % 128)));
  EXPECT_NEAR(curve.Predict(100), 0.2, 1e-9);
  for (int i = 0; i < 600; ++i) curve.Add(1 + i % 16, 1e-3 * (1 + (i % 16)));
  EXPECT_GT(curve.Predict(100), 0.15) << "still within max_age: the old timings hold";
  for (int i = 0; i < 600; ++i) curve.Add(1 + i % 16, 1e-3 * (1 + (i % 16)));
  EXPECT_EQ(curve.observed_bins(), 16);
  EXPECT_NEAR(curve.Predict(100), 0.1, 0.01) << "extrapolated from the fresh bins";
}

TEST(CostCurveTest, ColdCurveUsesThePriorShape) {
  CostCurve curve({.max_x = 4096, .prior_knee = 64, .prior_seconds = 2e-3});
  EXPECT_DOUBLE_EQ(curve.Predict(1), 2e-3);
  EXPECT_DOUBLE_EQ(curve.Predict(64), 2e-3);
  EXPECT_DOUBLE_EQ(curve.Predict(128), 4e-3);
  curve.Add(256, 8e-3);  // one bin: the prior's shape through it
  EXPECT_DOUBLE_EQ(curve.Predict(512), 16e-3);
  EXPECT_DOUBLE_EQ(curve.Predict(32), 2e-3);
  // Bad timings are ignored.
  curve.Add(10, -1);
  curve.Add(10, NAN);
  EXPECT_EQ(curve.samples(), 1);
}

TEST(CostCurveTest, FitRooflineIsExactOnExactPoints) {
  std::vector<double> x, y, w;
  for (double v = 1; v <= 300; v += 7) {
    x.push_back(v);
    y.push_back(std::max(4.0 + 0.01 * v, 0.05 * v));
    w.push_back(1);
  }
  const RooflineFit fit = FitRoofline(x, y, w);
  EXPECT_NEAR(fit.a, 4.0, 1e-6);
  EXPECT_NEAR(fit.b, 0.01, 1e-8);
  EXPECT_NEAR(fit.c, 0.05, 1e-8);
  EXPECT_NEAR(fit.knee(), 100, 1e-3);
}

// A right branch through one point fits it exactly whatever the curve: a few rows seen once each
// on a line (a CPU's verify below its knee) extrapolate along that line, not along the slope
// from the origin to the last point (which put 8 rows at four times the cost of 2).
TEST(CostCurveTest, ExtrapolatesAFewPointsAlongTheirLine) {
  CostCurve curve;
  for (int64_t x : {1, 2, 3, 4}) curve.Add(x, 0.171 + 0.010 * double(x));
  EXPECT_NEAR(curve.Predict(8), 0.251, 1e-6);
  EXPECT_NEAR(curve.fit().c, 0, 1e-12);
}

// A step slowed 3× by other work, alone in its bin above bins of fewer rows, is capped at what
// subadditivity allows: ⌈x/x₀⌉ times a smaller bin x₀.
TEST(CostCurveTest, CapsASparseSlowedBinBySmallerOnes) {
  CostCurve curve;
  curve.Add(1, 0.181);
  curve.Add(2, 0.191);
  curve.Add(4, 3 * 0.211);
  EXPECT_NEAR(curve.Predict(4), 2 * 0.191, 1e-9);
  curve.Add(4, 0.211);  // a second sample: the lower median
  EXPECT_NEAR(curve.Predict(4), 0.211, 1e-9);
}

}  // namespace
}  // namespace dscale::budget
