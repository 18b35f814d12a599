#include "kernels/cpu/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
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

namespace {

// Inserts `value` into top[0, count) (descending, `*held` filled so far) where it belongs, or
// drops it when the window is full and it is not above the last.
inline void InsertLargest(float value, int count, float* top, int* held) {
  if (*held == count && !(value > top[count - 1])) return;
  int pos = *held < count ? (*held)++ : count - 1;
  while (pos > 0 && top[pos - 1] < value) {
    top[pos] = top[pos - 1];
    --pos;
  }
  top[pos] = value;
}

// Whether any lane of x[0, 4·kLanes) exceeds `threshold`.
inline bool AnyAbove(const float* x, float threshold) {
  const simd::Floats t = simd::Splat(threshold);
  const simd::Ints above = (simd::Load(x) > t) | (simd::Load(x + kLanes) > t) |
                           (simd::Load(x + 2 * kLanes) > t) | (simd::Load(x + 3 * kLanes) > t);
  int32_t any = 0;
  for (int i = 0; i < kLanes; ++i) any |= above[i];
  return any != 0;
}

}  // namespace

void LargestValues(const float* x, int64_t n, int count, float* out) {
  DSCALE_CHECK(count >= 1 && count <= kMaxLargestValues && count <= n);
  int held = 0;
  int64_t i = 0;
  for (; i < count; ++i) InsertLargest(x[i], count, out, &held);
  // Every value of a skipped block is at most the threshold it was compared with, which only
  // grows: the scalar insertion would have dropped each of them too, so the result is its own.
  constexpr int64_t kBlock = 4 * kLanes;
  for (; i + kBlock <= n; i += kBlock) {
    if (!AnyAbove(x + i, out[count - 1])) continue;
    for (int64_t j = i; j < i + kBlock; ++j) InsertLargest(x[j], count, out, &held);
  }
  for (; i < n; ++i) InsertLargest(x[i], count, out, &held);
}

}  // namespace dscale::cpu
