#include "budget/cost_curve.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/check.h"

namespace dscale::budget {
namespace {

constexpr int64_t kExactBins = 128;  // x ≤ 128: one bin per x
constexpr int kBinsPerOctave = 32;

// Lower median of values[0, count), count in [1, kRing] (insertion sort: eight values at
// most). Lower: timing noise is mostly one-sided — other work slows a step, nothing speeds it
// up — so of two samples the smaller is the better guess.
double LowerMedian(std::array<double, CostCurve::kRing> values, int count) {
  for (int i = 1; i < count; ++i) {
    for (int j = i; j > 0 && values[j - 1] > values[j]; --j) std::swap(values[j - 1], values[j]);
  }
  return values[(count - 1) / 2];
}

// Left line over points [0, s): weighted least squares with b ≥ 0 and a ≥ 0.
struct Line {
  double a = 0, b = 0;
};
Line FitLeft(const std::vector<double>& x, const std::vector<double>& y,
             const std::vector<double>& w, size_t s) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < s; ++i) {
    sw += w[i];
    sx += w[i] * x[i];
    sy += w[i] * y[i];
    sxx += w[i] * x[i] * x[i];
    sxy += w[i] * x[i] * y[i];
  }
  const double var = sxx * sw - sx * sx;
  Line line{.a = sy / sw, .b = 0};
  if (var > 1e-12 * sxx * sw) {
    line.b = (sxy * sw - sx * sy) / var;
    line.a = (sy - line.b * sx) / sw;
  }
  if (line.b < 0) line = {.a = sy / sw, .b = 0};
  if (line.a < 0) line = {.a = 0, .b = sxy / sxx};
  return line;
}

}  // namespace

// Pool adjacent violators: blocks of equal value, merged while a block's (weighted) mean
// exceeds the next one's, so y becomes nondecreasing in x.
void CostCurve::PoolAdjacentViolators(std::vector<Point>* points) {
  struct Block {
    double sum_wy, sum_w;
    size_t count;
  };
  std::vector<Block> blocks;
  for (const Point& p : *points) {
    blocks.push_back({p.w * p.y, p.w, 1});
    while (blocks.size() > 1 && blocks[blocks.size() - 2].sum_wy / blocks[blocks.size() - 2].sum_w >
                                    blocks.back().sum_wy / blocks.back().sum_w) {
      const Block last = blocks.back();
      blocks.pop_back();
      blocks.back().sum_wy += last.sum_wy;
      blocks.back().sum_w += last.sum_w;
      blocks.back().count += last.count;
    }
  }
  size_t i = 0;
  for (const Block& b : blocks) {
    for (size_t j = 0; j < b.count; ++j) (*points)[i++].y = b.sum_wy / b.sum_w;
  }
}

// Timing noise is one-sided (other work slows a step, nothing speeds it up) and more rows never
// cost less, so a sparse bin that costs more than some larger-x bin holds a slowed step: it is
// capped at the cheapest larger-x bin. Pooling it with its neighbours instead (PAVA) would
// spread one slowed sample over the bins around it — a single slowed step at 64 rows, pooled
// with the 128-row bin, made a GPU-shaped curve look flat beyond its knee and the controller
// verify 162 rows instead of 128 for the rest of a 400-step run.
void CostCurve::CapSparseBinsByLargerOnes(std::vector<Point>* points) {
  double cheapest_larger = INFINITY;
  for (size_t i = points->size(); i-- > 0;) {
    Point& p = (*points)[i];
    if (p.w < 3) p.y = std::min(p.y, cheapest_larger);
    cheapest_larger = std::min(cheapest_larger, p.y);
  }
}

// The other side of the same argument: k·x work could run as k batches of x, so y(x') ≤
// ⌈x'/x⌉·y(x) for a smaller bin x. A sparse bin above that bound holds a slowed step (alone at
// the top of a ramp it would otherwise stop every later step from verifying there). Bins are
// few (one per x visited), so every pair is checked.
void CostCurve::CapSparseBinsBySmallerOnes(std::vector<Point>* points) {
  for (size_t i = 1; i < points->size(); ++i) {
    Point& p = (*points)[i];
    if (p.w >= 3) continue;
    for (size_t j = 0; j < i; ++j) {
      const Point& q = (*points)[j];
      p.y = std::min(p.y, q.y * std::ceil(p.x / q.x));
    }
  }
}

RooflineFit CostCurve::FitPoints(const std::vector<Point>& points) {
  std::vector<double> xs, ys, ws;
  for (const Point& p : points) {
    xs.push_back(p.x);
    ys.push_back(p.y);
    ws.push_back(p.w);
  }
  return FitRoofline(xs, ys, ws);
}

double RooflineFit::operator()(double x) const { return std::max(a + b * x, c * x); }

double RooflineFit::knee() const { return c > b ? a / (c - b) : 0.0; }

RooflineFit FitRoofline(const std::vector<double>& x, const std::vector<double>& y,
                        const std::vector<double>& w) {
  DSCALE_CHECK(x.size() == y.size() && x.size() == w.size());
  const size_t n = x.size();
  if (n == 0) return {};
  // Right-branch sums Σw·x·y and Σw·x² over [s, n).
  std::vector<double> right_xy(n + 1, 0.0), right_xx(n + 1, 0.0);
  for (size_t i = n; i-- > 0;) {
    right_xy[i] = right_xy[i + 1] + w[i] * x[i] * y[i];
    right_xx[i] = right_xx[i + 1] + w[i] * x[i] * x[i];
  }
  RooflineFit best;
  double best_error = INFINITY;
  for (size_t s = 1; s <= n; ++s) {
    // A right branch through one point fits it exactly whatever the curve: no evidence of a
    // proportional regime, and it would extrapolate that point's slope from the origin.
    if (n - s == 1) continue;
    const Line left = FitLeft(x, y, w, s);
    const RooflineFit fit{
        .a = left.a,
        .b = left.b,
        .c = s < n && right_xx[s] > 0 ? std::max(0.0, right_xy[s] / right_xx[s]) : 0.0};
    double error = 0;
    for (size_t i = 0; i < n; ++i) error += w[i] * std::pow(fit(x[i]) - y[i], 2);
    if (error < best_error) {
      best_error = error;
      best = fit;
    }
  }
  return best;
}

CostCurve::CostCurve(CostCurveOptions options) : options_(options) {
  DSCALE_CHECK(options_.max_x >= 1 && options_.prior_knee > 0 && options_.prior_seconds > 0 &&
               options_.max_age >= 1);
  bins_.resize(static_cast<size_t>(BinIndex(options_.max_x)) + 1);
}

int CostCurve::BinIndex(int64_t x) {
  if (x <= kExactBins) return static_cast<int>(x - 1);
  const int octave = std::bit_width(static_cast<uint64_t>(x)) - 1;  // ⌊log2 x⌋ ≥ 7
  const int64_t offset = (x - (int64_t{1} << octave)) >> (octave - 5);
  return static_cast<int>(kExactBins + (octave - 7) * kBinsPerOctave + offset);
}

void CostCurve::Add(int64_t x, double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return;
  x = std::clamp<int64_t>(x, 1, options_.max_x);
  Bin& bin = bins_[static_cast<size_t>(BinIndex(x))];
  bin.x[static_cast<size_t>(bin.next)] = static_cast<double>(x);
  bin.y[static_cast<size_t>(bin.next)] = seconds;
  bin.added[static_cast<size_t>(bin.next)] = samples_;
  bin.next = (bin.next + 1) % kRing;
  bin.count = std::min(bin.count + 1, kRing);
  ++samples_;
  dirty_ = true;
}

void CostCurve::Refresh() const {
  if (!dirty_) return;
  dirty_ = false;
  points_.clear();
  for (const Bin& bin : bins_) {
    std::array<double, kRing> fresh_y{};
    double sum_x = 0;
    int fresh = 0;
    for (size_t i = 0; i < static_cast<size_t>(bin.count); ++i) {
      if (samples_ - bin.added[i] > options_.max_age) continue;
      sum_x += bin.x[i];
      fresh_y[static_cast<size_t>(fresh++)] = bin.y[i];
    }
    if (fresh == 0) continue;
    points_.push_back({.x = sum_x / fresh, .y = LowerMedian(fresh_y, fresh), .w = double(fresh)});
  }
  // A bin of one or two samples cannot outvote an outlier: cap it at 1.5× a first fit over all
  // bins (which many well-sampled bins anchor; with few bins it passes near them anyway).
  const RooflineFit rough = FitPoints(points_);
  for (Point& p : points_) {
    if (p.w < 3) p.y = std::min(p.y, 1.5 * rough(p.x));
  }
  CapSparseBinsBySmallerOnes(&points_);
  CapSparseBinsByLargerOnes(&points_);
  PoolAdjacentViolators(&points_);
  fit_ = FitPoints(points_);
}

int CostCurve::observed_bins() const {
  Refresh();
  return static_cast<int>(points_.size());
}

const RooflineFit& CostCurve::fit() const {
  Refresh();
  return fit_;
}

double CostCurve::min_observed_x() const {
  Refresh();
  return points_.empty() ? 0.0 : points_.front().x;
}

double CostCurve::max_observed_x() const {
  Refresh();
  return points_.empty() ? 0.0 : points_.back().x;
}

double CostCurve::Predict(double x) const {
  Refresh();
  const auto shape = [&](double v) { return std::max(1.0, v / options_.prior_knee); };
  if (points_.empty()) return options_.prior_seconds * shape(x) / shape(1.0);
  if (points_.size() == 1) return points_[0].y * shape(x) / shape(points_[0].x);
  if (x < points_.front().x || x > points_.back().x) return Extrapolate(x);
  const auto above = std::lower_bound(points_.begin(), points_.end(), x,
                                      [](const Point& p, double v) { return p.x < v; });
  if (above->x == x || above == points_.begin()) return above->y;
  const Point& lo = *(above - 1);
  const double t = (x - lo.x) / (above->x - lo.x);
  return lo.y + t * (above->y - lo.y);
}

double CostCurve::Extrapolate(double x) const {
  if (x > points_.back().x) {
    const Point& last = points_.back();
    return last.y + std::max(0.0, fit_(x) - fit_(last.x));
  }
  const Point& first = points_.front();
  return std::max(0.0, first.y - std::max(0.0, fit_(first.x) - fit_(x)));
}

}  // namespace dscale::budget
