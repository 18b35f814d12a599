#pragma once
// AVX2 helpers the int8 and int4 kernels share (gemm_int8_dot.cc, gemm_int4.cc, int8_quantize.cc):
// exact integer lane sums and the widening of BF16 scales. Compiled for AVX2 + FMA whatever the
// build's baseline (DSCALE_AVX2, isa_targets.h); callers run them only where the CPU has both.

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/isa_targets.h"

namespace dscale::cpu::avx2 {

// The sum of v's 8 int32 lanes (exact where it fits int32).
DSCALE_AVX2 inline int32_t SumInt32Lanes(__m256i v) {
  __m128i t = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
  return _mm_cvtsi128_si32(t);
}

// Lane j of the result: the sum of v[j]'s 8 lanes (exact: int32, far from overflow).
DSCALE_AVX2 inline __m256i SumLanesOf8(const __m256i v[8]) {
  // hadd pairs lanes within 128-bit halves: h0123's low half holds the low-half sums of v[0..3],
  // its high half their high-half sums.
  const __m256i h0123 =
      _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  const __m256i h4567 =
      _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20),
                          _mm256_permute2x128_si256(h0123, h4567, 0x31));
}

// 8 consecutive BF16 scales as f32: each zero-extended to 32 bits and shifted into the top half.
DSCALE_AVX2 inline __m256 WidenScales8(const Int8Scale* s) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

}  // namespace dscale::cpu::avx2
