// The int8 format's two quantisers (gemm_int8.h): activations per row and group at each int8 ×
// int8 call, and weights once, at load (`--weights int8`; with ±7 in place of ±127 and the values
// packed two to a byte, `--weights int4`: gemm_int4.h). Both take a group's largest magnitude
// (an exact maximum), divide every value by the group's scale (IEEE division) and convert to the
// nearest integer, ties to even (the default rounding mode), clamped to ±127. Those operations
// are exact whatever the vector width, so the AVX2 variants give the portable loops' bits. The
// weights' AVX2 variant took the quantising of a Qwen3-1.7B-shaped model from about 5 CPU-seconds
// to 0.3 (docs/BENCHMARKS.md, "Int8 weights on the CPU").

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/gemm_int4.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/int8_avx2.h"
#include "kernels/cpu/isa_targets.h"

namespace dscale::cpu {
namespace {

using avx2::SumInt32Lanes;

constexpr int64_t kGroup = kInt8GroupSize;
static_assert(kGroup == 32, "the vector quantisers take groups of 4 × 8 floats");
// The largest magnitude a quantised value takes: the range is symmetric, so −128 is unused.
constexpr float kInt8Max = 127.0f;

// q[i] = x[i] / d rounded to nearest even, clamped to ±limit (127, or 7 for the int4 format), for
// i < n (d > 0, x finite). x / d can pass limit + 0.5 only through the rounding of d. nearbyint is
// one instruction; std::round a call.
int32_t RoundGroupPortable(const float* x, int64_t n, float d, int8_t* q, float limit = kInt8Max) {
  int32_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    q[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] / d), -limit, limit));
    total += q[i];
  }
  return total;
}

float LargestMagnitudePortable(const float* x, int64_t n) {
  float largest = 0.0f;
  for (int64_t i = 0; i < n; ++i) largest = std::max(largest, std::fabs(x[i]));
  return largest;
}

// One activation group of n ≤ 32 values into q[0, 32) (zeros past n).
void ActivationGroupPortable(const float* x, int64_t n, int8_t* q, float* scale, int32_t* sum) {
  std::memset(q, 0, kGroup);
  *sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) {
      *scale = std::numeric_limits<float>::quiet_NaN();
      return;
    }
  }
  const float d = LargestMagnitudePortable(x, n) / kInt8Max;
  *scale = d;
  // d is 0 for all zeros, or a largest value below 127 × the smallest subnormal.
  if (d != 0.0f) *sum = RoundGroupPortable(x, n, d, q);
}

// One weight group of n ≤ 32 values into q[0, n), within ±limit.
void WeightGroupPortable(const float* w, int64_t n, int8_t* q, Int8Scale* scale, float limit) {
  *scale = Int8ScaleAtLeast(LargestMagnitudePortable(w, n) / limit);
  const float s = Int8ScaleValue(*scale);
  if (s == 0.0f) {
    std::memset(q, 0, static_cast<size_t>(n));
  } else {
    RoundGroupPortable(w, n, s, q, limit);
  }
}

#define DSCALE_UNROLL _Pragma("GCC unroll 4")

DSCALE_AVX2 inline void LoadGroupAvx2(const float* x, __m256 v[4]) {
  DSCALE_UNROLL
  for (int j = 0; j < 4; ++j) v[j] = _mm256_loadu_ps(x + 8 * j);
}

DSCALE_AVX2 inline float LargestMagnitudeAvx2(const __m256 v[4]) {
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 largest = _mm256_setzero_ps();
  DSCALE_UNROLL
  for (int j = 0; j < 4; ++j) largest = _mm256_max_ps(largest, _mm256_and_ps(v[j], magnitude));
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(largest), _mm256_extractf128_ps(largest, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// Whether any of the group's values is NaN or infinite (its exponent bits all ones).
DSCALE_AVX2 inline bool AnyNonFiniteAvx2(const __m256 v[4]) {
  const __m256i exponent = _mm256_set1_epi32(0x7f800000);
  __m256i nonfinite = _mm256_setzero_si256();
  DSCALE_UNROLL
  for (int j = 0; j < 4; ++j) {
    const __m256i e = _mm256_and_si256(_mm256_castps_si256(v[j]), exponent);
    nonfinite = _mm256_or_si256(nonfinite, _mm256_cmpeq_epi32(e, exponent));
  }
  return !_mm256_testz_si256(nonfinite, nonfinite);
}

// RoundGroupPortable for a whole group: vcvtps2dq converts to nearest even under the default
// rounding mode, and clamping the integers equals clamping the rounded floats.
DSCALE_AVX2 inline int32_t RoundGroupAvx2(const __m256 v[4], float d, int8_t* q,
                                          int32_t limit = static_cast<int32_t>(kInt8Max)) {
  const __m256 dv = _mm256_set1_ps(d);
  const __m256i hi = _mm256_set1_epi32(limit), lo = _mm256_set1_epi32(-limit);
  __m256i qi[4];
  __m256i total = _mm256_setzero_si256();
  DSCALE_UNROLL
  for (int j = 0; j < 4; ++j) {
    qi[j] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_div_ps(v[j], dv)), lo), hi);
    total = _mm256_add_epi32(total, qi[j]);
  }
  // packs works within 128-bit halves: the bytes come out as dwords a0 b0 c0 d0 a1 b1 c1 d1 of
  // the four vectors' halves, put back in order by one dword permutation.
  const __m256i bytes =
      _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
  _mm256_storeu_si256(
      reinterpret_cast<__m256i*>(q),
      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  return SumInt32Lanes(total);
}

DSCALE_AVX2 void ActivationGroupAvx2(const float* x, int8_t* q, float* scale, int32_t* sum) {
  __m256 v[4];
  LoadGroupAvx2(x, v);
  const float d = AnyNonFiniteAvx2(v) ? std::numeric_limits<float>::quiet_NaN()
                                      : LargestMagnitudeAvx2(v) / kInt8Max;
  *scale = d;
  if (d == 0.0f || std::isnan(d)) {
    std::memset(q, 0, kGroup);
    *sum = 0;
    return;
  }
  *sum = RoundGroupAvx2(v, d, q);
}

// A row of weights within ±limit: its whole groups 32 values at a time, a shorter last one
// portably.
DSCALE_AVX2 void WeightRowAvx2(const float* w, int64_t in, int8_t* q, Int8Scale* scales,
                               int32_t limit) {
  const int64_t full = in / kGroup;
  for (int64_t g = 0; g < full; ++g) {
    __m256 v[4];
    LoadGroupAvx2(w + g * kGroup, v);
    scales[g] = Int8ScaleAtLeast(LargestMagnitudeAvx2(v) / static_cast<float>(limit));
    const float s = Int8ScaleValue(scales[g]);
    if (s == 0.0f) {
      std::memset(q + g * kGroup, 0, kGroup);
    } else {
      RoundGroupAvx2(v, s, q + g * kGroup, limit);
    }
  }
  if (full * kGroup < in) {
    WeightGroupPortable(w + full * kGroup, in - full * kGroup, q + full * kGroup, scales + full,
                        static_cast<float>(limit));
  }
}

// One row of weights within ±limit into q[0, in) and scales[0, Int8Groups(in)].
void WeightRow(const float* w, int64_t in, int8_t* q, Int8Scale* scales, int32_t limit, bool avx2) {
  if (avx2) return WeightRowAvx2(w, in, q, scales, limit);
  for (int64_t g = 0; g * kGroup < in; ++g) {
    WeightGroupPortable(w + g * kGroup, std::min(kGroup, in - g * kGroup), q + g * kGroup,
                        scales + g, static_cast<float>(limit));
  }
}

#undef DSCALE_UNROLL

}  // namespace

void QuantizeInt8Activations(const float* x, int64_t rows, int64_t in, int8_t* q, float* scales,
                             int32_t* sums) {
  DSCALE_CHECK(rows >= 0 && in >= 0);
  const int64_t groups = Int8Groups(in);
  const bool vector = HasAvx2Fma();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* xg = x + r * in + g * kGroup;
      const int64_t n = std::min(kGroup, in - g * kGroup);
      int8_t* qg = q + (r * groups + g) * kGroup;
      const int64_t at = r * groups + g;
      if (vector && n == kGroup) {
        ActivationGroupAvx2(xg, qg, scales + at, sums + at);
      } else {
        ActivationGroupPortable(xg, n, qg, scales + at, sums + at);
      }
    }
  }
}

void QuantizeInt8Weights(const float* w, int64_t rows, int64_t in, int8_t* q, Int8Scale* scales,
                         bool vector) {
  DSCALE_CHECK(rows >= 0 && in >= 0);
  const int64_t groups = Int8Groups(in);
  const bool avx2 = vector && HasAvx2Fma();
  for (int64_t r = 0; r < rows; ++r) {
    WeightRow(w + r * in, in, q + r * in, scales + r * groups, static_cast<int32_t>(kInt8Max),
              avx2);
  }
}

void QuantizeInt4Weights(const float* w, int64_t rows, int64_t in, uint8_t* w4, Int8Scale* scales,
                         bool vector) {
  DSCALE_CHECK(rows >= 0 && in >= 0);
  const int64_t groups = Int8Groups(in);
  const bool avx2 = vector && HasAvx2Fma();
  // One row's values as int8 first, zero past `in` (a short last group's padding), then packed.
  // The loader calls this once per row on every thread: the buffer is the thread's own.
  thread_local std::vector<int8_t> q;
  q.resize(static_cast<size_t>(groups * kGroup));
  for (int64_t r = 0; r < rows; ++r) {
    WeightRow(w + r * in, in, q.data(), scales + r * groups, kInt4Max, avx2);
    std::fill(q.begin() + in, q.end(), int8_t{0});
    uint8_t* packed = w4 + r * Int4RowBytes(in);
    for (int64_t g = 0; g < groups; ++g) {
      const int8_t* qg = q.data() + g * kGroup;
      for (int64_t j = 0; j < kGroup / 2; ++j) {
        packed[g * (kGroup / 2) + j] =
            static_cast<uint8_t>((qg[j] + 8) | ((qg[j + kGroup / 2] + 8) << 4));
      }
    }
  }
}

}  // namespace dscale::cpu
