#pragma once
// An online, robust estimate of a cost curve y(x) — seconds against verified rows, or against
// drafted requests — from noisy step timings, in bounded memory: per-bin lower medians of the
// latest samples, made nondecreasing, interpolated inside the observed range and extrapolated by
// a roofline fit max(a + b·x, c·x) outside it. The binning, outlier and ageing rules:
// docs/VERIFY_BUDGET.md ("Cost curves").

#include <array>
#include <cstdint>
#include <vector>

namespace dscale::budget {

struct RooflineFit {
  double a = 0;  // seconds at x → 0 on the left branch (fixed cost)
  double b = 0;  // seconds per x below the knee
  double c = 0;  // seconds per x on the right branch (0: no right branch)
  double operator()(double x) const;
  // Where the right branch takes over (a / (c − b)); 0 without one.
  double knee() const;
};

struct CostCurveOptions {
  int64_t max_x = 4096;         // the largest x the curve is asked about
  double prior_knee = 64;       // cold shape: flat up to this x, then proportional
  double prior_seconds = 1e-3;  // cold value at x = 1 before any sample
  int64_t max_age = 1024;       // samples (Add calls) after which a sample is dropped
};

class CostCurve {
 public:
  static constexpr int kRing = 8;

  explicit CostCurve(CostCurveOptions options = {});

  // One timing: x ≥ 1 (clamped to max_x), seconds ≥ 0 (negative or non-finite are ignored).
  void Add(int64_t x, double seconds);
  // The estimate at x ≥ 1.
  double Predict(double x) const;

  int64_t samples() const { return samples_; }
  int observed_bins() const;
  // Over the observed bins; zeros when none.
  const RooflineFit& fit() const;
  double min_observed_x() const;
  double max_observed_x() const;

 private:
  struct Bin {
    std::array<double, kRing> x{};
    std::array<double, kRing> y{};
    std::array<int64_t, kRing> added{};  // samples_ when it was added
    int count = 0;                       // samples held, ≤ kRing
    int next = 0;                        // ring position of the next write
  };
  struct Point {
    double x, y, w;
  };

  static int BinIndex(int64_t x);
  static void CapSparseBinsByLargerOnes(std::vector<Point>* points);
  static void CapSparseBinsBySmallerOnes(std::vector<Point>* points);
  static void PoolAdjacentViolators(std::vector<Point>* points);
  static RooflineFit FitPoints(const std::vector<Point>& points);
  void Refresh() const;
  double Extrapolate(double x) const;

  CostCurveOptions options_;
  std::vector<Bin> bins_;
  int64_t samples_ = 0;
  // Derived from bins_ on demand.
  mutable bool dirty_ = true;
  mutable std::vector<Point> points_;  // observed bins by x, y nondecreasing
  mutable RooflineFit fit_;
};

// Weighted least-squares roofline over points sorted by x: every split into a left line
// a + b·x and a right line c·x through the origin is tried and the split with the smallest
// squared error of max(a + b·x, c·x) kept. Exposed for tests.
RooflineFit FitRoofline(const std::vector<double>& x, const std::vector<double>& y,
                        const std::vector<double>& w);

}  // namespace dscale::budget
