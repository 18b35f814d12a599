#pragma once
// Fixed-width float vectors for the hot loops of the CPU kernels (module-private).
//
// A GCC/Clang vector extension rather than intrinsics: the same source builds for any target,
// and the compiler keeps arrays of these in registers where a plain float array in a loop nest
// would round-trip through memory. The width follows the build's target: one 256-bit AVX
// register on x86-64-v3 (the Release flags), one 128-bit register otherwise (sanitizer and
// debug builds), which also keeps wider-than-target vectors out of function signatures.

#include <cstdint>
#include <cstring>

// A file compiled for a wider target than the build's (attention_avx512.cc) sets
// DSCALE_SIMD_LANES before including this header. Each width's definitions live in their own
// inline namespace, so files of different widths never share (and the linker never merges) an
// inline function of the same name.
#if !defined(DSCALE_SIMD_LANES)
#if defined(__AVX__)
#define DSCALE_SIMD_LANES 8
#else
#define DSCALE_SIMD_LANES 4
#endif
#endif

#if DSCALE_SIMD_LANES == 16
#define DSCALE_SIMD_WIDTH lanes16
#elif DSCALE_SIMD_LANES == 8
#define DSCALE_SIMD_WIDTH lanes8
#elif DSCALE_SIMD_LANES == 4
#define DSCALE_SIMD_WIDTH lanes4
#else
#error "DSCALE_SIMD_LANES must be 4, 8 or 16"
#endif

namespace dscale::cpu::simd {
inline namespace DSCALE_SIMD_WIDTH {

inline constexpr int kLanes = DSCALE_SIMD_LANES;

using Floats = float __attribute__((vector_size(kLanes * sizeof(float))));
using Ints = int32_t __attribute__((vector_size(kLanes * sizeof(int32_t))));

// Unaligned load and store (the memcpy compiles to one vector move).
inline Floats Load(const float* p) {
  Floats v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void Store(float* p, Floats v) { std::memcpy(p, &v, sizeof(v)); }
// Every lane x. (Not Floats{} + x: that is a real addition, since 0 + −0 is +0.)
inline Floats Splat(float x) {
  Floats v;
  for (int i = 0; i < kLanes; ++i) v[i] = x;
  return v;
}

inline Floats Max(Floats a, Floats b) { return a > b ? a : b; }
inline float HorizontalSum(Floats v) {
  float s = 0.0f;
  for (int i = 0; i < kLanes; ++i) s += v[i];
  return s;
}

// e^x per lane to within a couple of float ulps, for x ≤ 0 (scores minus their maximum, or
// −|x| for a sigmoid).
// x = n·ln2 + r with |r| ≤ ln2/2; e^r from its degree-7 Taylor polynomial (truncation error
// r⁸/8! < 6e-9, below float resolution); 2^n is assembled in the exponent bits. Lanes below
// −87.3, −inf included, give exactly 0 (e^−87.3 is just above the smallest normal float).
inline Floats ExpNonPositive(Floats x) {
  constexpr float kLog2e = 1.44269504088896341f;
  // ln2 split so that n·kLn2Hi is exact for the |n| ≤ 126 that occur: r keeps full precision.
  constexpr float kLn2Hi = 0.693145751953125f;
  constexpr float kLn2Lo = 1.42860682030941723e-6f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5·2^23: adding it rounds to an integer
  constexpr float kMinArg = -87.3f;
  const Floats clamped = x < kMinArg ? Splat(kMinArg) : x;
  const Floats n = (clamped * kLog2e + kRoundMagic) - kRoundMagic;
  const Floats r = (clamped - n * kLn2Hi) - n * kLn2Lo;
  Floats poly = Splat(1.0f / 5040.0f);
  poly = poly * r + 1.0f / 720.0f;
  poly = poly * r + 1.0f / 120.0f;
  poly = poly * r + 1.0f / 24.0f;
  poly = poly * r + 1.0f / 6.0f;
  poly = poly * r + 0.5f;
  poly = poly * r + 1.0f;
  poly = poly * r + 1.0f;
  const Ints exponent = (__builtin_convertvector(n, Ints) + 127) << 23;
  Floats two_n;
  std::memcpy(&two_n, &exponent, sizeof(two_n));
  return x < kMinArg ? Floats{} : poly * two_n;
}

// σ(x) = 1/(1 + e^−x) per lane from e = e^−|x| ∈ (0, 1]: 1/(1 + e) for x ≥ 0 and e/(1 + e)
// otherwise, so nothing overflows for any finite x and σ of a very negative x underflows to 0.
inline Floats Sigmoid(Floats x) {
  const Floats e = ExpNonPositive(x < 0.0f ? x : -x);
  const Floats inv = 1.0f / (1.0f + e);
  return x >= 0.0f ? inv : e * inv;
}

// silu(x) = x·σ(x) per lane (σ as Sigmoid's: a very negative x gives −0, its limit).
inline Floats Silu(Floats x) { return x * Sigmoid(x); }

// Σ x[i]² over n values in double: lane l sums x[l], x[l + kLanes], … in order, the lanes are
// added in lane order, then the tail in order. A fixed order, so the sum of a row depends on its
// values alone.
inline double SumSquares(const float* x, int64_t n) {
  using Doubles = double __attribute__((vector_size(kLanes * sizeof(double))));
  Doubles lanes{};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const Doubles d = __builtin_convertvector(Load(x + i), Doubles);
    lanes += d * d;
  }
  double sum = 0;
  for (int l = 0; l < kLanes; ++l) sum += lanes[l];
  for (; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

}  // namespace DSCALE_SIMD_WIDTH
}  // namespace dscale::cpu::simd
