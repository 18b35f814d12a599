#include "kernels/cpu/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/simd.h"

namespace dscale::cpu {
namespace {

using simd::kLanes;

float RowMax(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// x[i] = e^(x[i] − m) over [begin, end), returning the sum. Vector lanes add at most
// kSumBlock / kLanes terms each in float before the caller folds the block into a double, so a
// 150k-entry vocabulary row still sums to ~1e-7 relative.
constexpr int64_t kSumBlock = 32 * kLanes;
float ExpBlock(float* x, int64_t begin, int64_t end, float m) {
  simd::Floats partial{};
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    const simd::Floats e = simd::ExpNonPositive(simd::Load(x + i) - m);
    simd::Store(x + i, e);
    partial += e;
  }
  float sum = simd::HorizontalSum(partial);
  for (; i < end; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  return sum;
}

// One row in place; the row must hold at least one finite logit. Subtracting the row maximum
// keeps every exponent ≤ 0, so logits of any magnitude neither overflow nor turn the row into
// NaN, and −inf logits (masked tokens) become exact zeros.
void SoftmaxRow(float* x, int64_t n) {
  const float m = RowMax(x, n);
  double sum = 0.0;
  for (int64_t b = 0; b < n; b += kSumBlock) sum += ExpBlock(x, b, std::min(n, b + kSumBlock), m);
  const float inv = static_cast<float>(1.0 / sum);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

// One block of ShiftedExpMoments: float lanes, at most kSumBlock / kLanes terms each.
ExpMoments ExpMomentsBlock(const float* x, int64_t begin, int64_t end, float shift) {
  simd::Floats sum{};
  simd::Floats weighted{};
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    const simd::Floats shifted = simd::Load(x + i) - shift;
    const simd::Floats e = simd::ExpNonPositive(shifted);
    sum += e;
    weighted += e * shifted;
  }
  ExpMoments m{simd::HorizontalSum(sum), simd::HorizontalSum(weighted)};
  for (; i < end; ++i) {
    const float shifted = x[i] - shift;
    const float e = std::exp(shifted);
    m.sum += e;
    m.weighted += static_cast<double>(e) * shifted;
  }
  return m;
}

constexpr int64_t kParallelMinValues = 1 << 20;

}  // namespace

ExpMoments ShiftedExpMoments(const float* x, int64_t n, float shift) {
  ExpMoments total;
  for (int64_t b = 0; b < n; b += kSumBlock) {
    const ExpMoments block = ExpMomentsBlock(x, b, std::min(n, b + kSumBlock), shift);
    total.sum += block.sum;
    total.weighted += block.weighted;
  }
  return total;
}

void SoftmaxRows(float* x, int64_t rows, int64_t n) {
  if (n == 0) return;
#pragma omp parallel for schedule(static) if (rows * n >= kParallelMinValues)
  for (int64_t r = 0; r < rows; ++r) SoftmaxRow(x + r * n, n);
}

void ArgmaxRows(const float* x, int64_t rows, int64_t n, int32_t* out) {
#pragma omp parallel for schedule(static) if (rows * n >= kParallelMinValues)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    // Two passes: a vectorised maximum, then the first index that holds it, which gives the
    // lowest index among ties. An empty row has no maximum and yields 0.
    const float m = RowMax(xr, n);
    int64_t best = 0;
    while (best < n && xr[best] != m) ++best;
    out[r] = static_cast<int32_t>(best < n ? best : 0);
  }
}

}  // namespace dscale::cpu
