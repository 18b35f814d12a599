#pragma once
// One group's step of the int8 × int8 kernels on AVX512-VNNI, shared by the kernels that read
// rows (gemm_int8_dot.cc) and those that read panels (gemm_panels512.cc): a group of 32 inputs of
// 16 outputs as its 8 dot-product steps' vectors, times a tile of quantised activation rows, each
// row's term added in gemm_int8.h's fixed order.

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/isa_targets.h"

namespace dscale::cpu::vnni512 {

inline constexpr int64_t kGroup = kInt8GroupSize;
// Dot-product steps (4 inputs each) of a group, and the outputs (lanes) of one vector.
inline constexpr int kSteps = static_cast<int>(kGroup / 4);
inline constexpr int kLanes = 16;

inline int32_t Load32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Group g's term for rows [r0, r0 + kRows) and the 16 outputs whose weights, offset by kOffset
// (128: int8 weights flipped; 8: 4-bit ones as stored), are wv and scales dw:
// a[r] = fma(fl(d_w · d_x), dot, a[r]) in every lane.
template <int kRows, int kOffset = 128>
[[gnu::always_inline]] DSCALE_AVX512VNNI inline void GroupVnni512(const Int8ActivationRows& xq,
                                                                  int64_t r0, int64_t g,
                                                                  const __m512i wv[kSteps],
                                                                  __m512 dw, __m512 a[kRows]) {
  _Pragma("GCC unroll 16") for (int r = 0; r < kRows; ++r) {
    const int64_t row = r0 + r;
    const int8_t* xr = xq.q + (row * xq.groups + g) * kGroup;
    // Two chains of 4 steps (integer sums: exact in any order) halve the latency a row waits.
    __m512i dot0 = _mm512_set1_epi32(-kOffset * xq.sum[row * xq.groups + g]);
    __m512i dot1 = _mm512_setzero_si512();
    _Pragma("GCC unroll 16") for (int s = 0; s < kSteps; s += 2) {
      dot0 = _mm512_dpbusd_epi32(dot0, wv[s], _mm512_set1_epi32(Load32(xr + 4 * s)));
      dot1 = _mm512_dpbusd_epi32(dot1, wv[s + 1], _mm512_set1_epi32(Load32(xr + 4 * s + 4)));
    }
    const __m512i dot = _mm512_add_epi32(dot0, dot1);
    const __m512 p = _mm512_mul_ps(dw, _mm512_set1_ps(xq.scale[row * xq.groups + g]));
    a[r] = _mm512_fmadd_ps(p, _mm512_cvtepi32_ps(dot), a[r]);
  }
}

}  // namespace dscale::cpu::vnni512
