#include "kernels/cpu/gemm_int8.h"

// Format. w[out, in] int8, row-major and dense; scales[out, groups] BF16, groups = ⌈in / 32⌉.
// Weight (o, i) stands for w[o, i] · scales[o, i / 32]: symmetric, one scale per group of 32
// consecutive inputs of one output row. That is llama.cpp's Q8_0 granularity, so an 8-bit model
// here and a Q8_0 one there round the same weights to grids of the same fineness and compare
// fairly in speed and accuracy. When `in` is not a multiple of 32, each row's last group is
// shorter (in mod 32 inputs) and has its own scale; groups never span two rows.
//
// Scales are BF16, not Q8_0's FP16: the same 2 bytes (1/16 byte per weight), but f32's exponent
// range, so no group's scale turns subnormal or zero (FP16 does below a largest |w| of
// 2⁻¹⁴·127 ≈ 7.8e-3, which small trained weights reach), and widening one is a shift. The
// quantiser rounds each scale up to a BF16 value (quantize_weights.h), so the kernels multiply by
// exactly the scale the weights were rounded against; its 8 significant bits make the grid at
// most 2⁻⁷ coarser than an exact scale's, and makes every dequantised weight w·s exact in f32
// (8 significant bits times 8).
//
// Every row count: register tiles of 4 outputs × up to 6 rows, as in LinearBf16 (gemm_bf16.h),
// widen each weight vector once per tile (sign-extend, convert, times the group's scale) and
// apply it to every row of the tile; an odd last row takes tiles of 8 outputs × 1 row with the
// same arithmetic, so a row's bits never depend on the rows beside it. Many rows (prefill) run
// in blocks that stay in L2 (row_blocks.h). Variants for AVX-512, AVX2 + FMA and portable C++,
// picked at run time. (Panels dequantised to f32 and multiplied by OpenBLAS's sgemm,
// LinearInt8DequantSgemm, remain for benchmarks: their rows' bits depend on the call's shape.)
//
// Numerics: each term w·s·x is formed with at most two roundings — x times the dequantised
// weight fl(w·s) (DequantizeInt8Rows) — and the terms are summed in f32. So each output is within
// γ_(in+1)·Σ|w·s·x| of the exact product with the weights w·s (float_bounds.h; γ_(in+2) with
// `accumulate`), one rounding per term more than an f32 kernel over the matrix fl(w·s)
// (WeightMatrix::ToF32) would cost.

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "kernels/cpu/bf16_isa.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/isa_targets.h"
#include "kernels/cpu/row_blocks.h"

namespace dscale::cpu {
namespace {

// The tiling constants follow LinearBf16's (gemm_bf16.cc), which measured them.
// Weight rows (outputs) that share one pass over the inputs in tiles of several rows.
constexpr int64_t kOutGroup = 4;
// Outputs of a one-row tile: eight weight streams in flight, where four suffice for BF16
// (docs/BENCHMARKS.md, "Measurements behind the kernels' constants").
constexpr int64_t kRowOuts = 8;
// Outputs per unit of work the threads share: one one-row tile, or two of the other tiles.
constexpr int64_t kOutBlock = 8;
// Below this many weights a call runs on one thread: a fork/join would cost more than the work.
constexpr int64_t kParallelMinWeights = int64_t{1} << 16;
// Bytes of one f32 weight panel of dequantise-and-sgemm (benchmarks; stays in cache while sgemm
// runs).
constexpr int64_t kPanelBytes = int64_t{8} << 20;
// How far ahead of its loads the tiles prefetch each weight row (the hardware prefetchers stop
// at 4 KiB page boundaries).
constexpr int64_t kPrefetchBytes = 1024;
// Weights per 64-byte line of a row: two groups. The tiles prefetch one line per row and line.
constexpr int64_t kLineWeights = 64;
static_assert(kLineWeights == 2 * kInt8GroupSize);
// The AVX-512 one-row step reads a group as two 16-lane vectors.
static_assert(kInt8GroupSize == 32);
// Groups whose scales share one 64-byte line of a row's scales.
constexpr int64_t kScaleLineGroups = 64 / sizeof(Int8Scale);

// The register tiles' loops over their fixed rows and outputs must be unrolled completely, or
// GCC at -O2 keeps the accumulator arrays in memory and every FMA becomes a load and a store.
#define DSCALE_UNROLL _Pragma("GCC unroll 16")

// At group `group` of kOuts rows (weights from `wo`, `in` apart; scales from `so`, `groups`
// apart): prefetches each row's weight line kPrefetchBytes ahead and, once per scale line, the
// scales of those weights. Near a row's end the lines as far into the same rows of the next
// kOuts outputs (the rows that follow in memory) are asked for instead, so short rows start
// their tile in cache; prefetches past the weights' end are harmless hints. Always inlined:
// called out of line, GCC 12 finds it free of side effects (prefetches count as none), marks it
// const and deletes every call.
template <int kOuts>
[[gnu::always_inline]] inline void Prefetch(const int8_t* wo, const Int8Scale* so, int64_t in,
                                            int64_t groups, int64_t group) {
  constexpr int64_t kAheadGroups = kPrefetchBytes / kInt8GroupSize;
  const int64_t ahead = group * kInt8GroupSize + kPrefetchBytes;
  const int8_t* w_at = ahead < in ? wo + ahead : wo + kOuts * in + (ahead - in);
  DSCALE_UNROLL
  for (int g = 0; g < kOuts; ++g) {
    _mm_prefetch(reinterpret_cast<const char*>(w_at + g * in), _MM_HINT_T0);
  }
  if (group % kScaleLineGroups != 0) return;
  const int64_t scale_ahead = group + kAheadGroups;
  const Int8Scale* s_at =
      scale_ahead < groups ? so + scale_ahead : so + kOuts * groups + (scale_ahead - groups);
  DSCALE_UNROLL
  for (int g = 0; g < kOuts; ++g) {
    _mm_prefetch(reinterpret_cast<const char*>(s_at + g * groups), _MM_HINT_T0);
  }
}

inline void Put(float* y, float value, bool accumulate) { *y = accumulate ? *y + value : value; }

// Inputs [k_begin, in) of one output row (weights `wo`, scales `so`) against x row `xr`: the
// tails the vector loops leave, in plain C++.
inline float TailDot(const int8_t* wo, const Int8Scale* so, const float* xr, int64_t k_begin,
                     int64_t in) {
  float sum = 0.0f;
  for (int64_t k = k_begin; k < in; ++k) {
    const float w = static_cast<float>(wo[k]) * Int8ScaleValue(so[k / kInt8GroupSize]);
    sum += w * xr[k];
  }
  return sum;
}

// Outputs [o_begin, o_end) for every row, in plain C++: per output, partial j adds the terms
// x · fl(w·s) with k ≡ j (mod 8) in order of k, then a fixed tree adds the partials (eight
// independent chains, as gemm_bf16.cc's portable tiles), the same sum whatever rows share the
// call.
void TiledPortable(const float* x, const int8_t* w, const Int8Scale* scales, float* y, int64_t rows,
                   int64_t in, int64_t out, bool accumulate, int64_t o_begin, int64_t o_end) {
  constexpr int kPartials = 8;
  static_assert(kInt8GroupSize % kPartials == 0);
  const int64_t groups = Int8Groups(in);
  for (int64_t o = o_begin; o < o_end; ++o) {
    const int8_t* wo = w + o * in;
    const Int8Scale* so = scales + o * groups;
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * in;
      float p[kPartials] = {};
      int64_t k = 0;
      for (; k + kPartials <= in; k += kPartials) {  // within one group: kPartials divides it
        const float scale = Int8ScaleValue(so[k / kInt8GroupSize]);
        for (int j = 0; j < kPartials; ++j)
          p[j] += static_cast<float>(wo[k + j]) * scale * xr[k + j];
      }
      for (int j = 0; k + j < in; ++j) {
        p[j] += static_cast<float>(wo[k + j]) * Int8ScaleValue(so[(k + j) / kInt8GroupSize]) *
                xr[k + j];
      }
      const float sum = ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]));
      Put(y + r * out + o, sum, accumulate);
    }
  }
}

// ---- AVX2 + FMA: 8 lanes. Tiles of 4 outputs × 2 rows, and 2 outputs × 6 rows from 6 rows on
// (LinearBf16's AVX2 shapes); an odd last row in tiles of 8 outputs × 1 row.

// 8 weights from p, sign-extended and converted.
DSCALE_AVX2 inline __m256 WidenInt8x8(const int8_t* p) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
}

// 8 weights from p times the group's scale: fl(w · s).
DSCALE_AVX2 inline __m256 LoadInt8x8(const int8_t* p, __m256 scale) {
  return _mm256_mul_ps(WidenInt8x8(p), scale);
}

DSCALE_AVX2 inline float Sum8(__m256 v) {
  const __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 pair = _mm_add_ps(half, _mm_movehl_ps(half, half));
  return _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)));
}

// kRows ≥ 2 rows of x (row r at x + r·in) against kOuts weight rows from `wo` (scales from
// `so`); y[r·out + g] gets output g of row r.
template <int kRows, int kOuts>
DSCALE_AVX2 void TileAvx2(const float* x, const int8_t* wo, const Int8Scale* so, int64_t in,
                          float* y, int64_t out, bool accumulate) {
  const int64_t groups = Int8Groups(in), full = in / kInt8GroupSize;
  __m256 acc[kRows][kOuts];
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    DSCALE_UNROLL
    for (int g = 0; g < kOuts; ++g) acc[r][g] = _mm256_setzero_ps();
  }
  const auto group = [&](int64_t group) DSCALE_AVX2 {
    const int64_t k0 = group * kInt8GroupSize;
    DSCALE_UNROLL
    for (int64_t j = 0; j < kInt8GroupSize; j += 8) {
      __m256 wv[kOuts];
      DSCALE_UNROLL
      for (int g = 0; g < kOuts; ++g) {
        wv[g] = LoadInt8x8(wo + g * in + k0 + j,
                           _mm256_set1_ps(Int8ScaleValue(so[g * groups + group])));
      }
      DSCALE_UNROLL
      for (int r = 0; r < kRows; ++r) {
        const __m256 xv = _mm256_loadu_ps(x + r * in + k0 + j);
        DSCALE_UNROLL
        for (int g = 0; g < kOuts; ++g) acc[r][g] = _mm256_fmadd_ps(wv[g], xv, acc[r][g]);
      }
    }
  };
  int64_t grp = 0;
  for (; grp + 2 <= full; grp += 2) {
    Prefetch<kOuts>(wo, so, in, groups, grp);
    group(grp);
    group(grp + 1);
  }
  if (grp < full) group(grp++);
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    DSCALE_UNROLL
    for (int g = 0; g < kOuts; ++g) {
      const float sum = Sum8(acc[r][g]) + TailDot(wo + g * in, so + g * groups, x + r * in,
                                                  full * kInt8GroupSize, in);
      Put(y + r * out + g, sum, accumulate);
    }
  }
}

// One row x against kOuts weight rows from `wo` (scales from `so`); y[g] gets output g, the
// same sums in the same order as TileAvx2's (see RowAvx512).
template <int kOuts>
DSCALE_AVX2 void RowAvx2(const float* x, const int8_t* wo, const Int8Scale* so, int64_t in,
                         float* y, bool accumulate) {
  const int64_t groups = Int8Groups(in), full = in / kInt8GroupSize;
  __m256 acc[kOuts];
  DSCALE_UNROLL
  for (int g = 0; g < kOuts; ++g) acc[g] = _mm256_setzero_ps();
  const auto group = [&](int64_t group) DSCALE_AVX2 {
    const int64_t k0 = group * kInt8GroupSize;
    __m256 xv[kInt8GroupSize / 8];
    DSCALE_UNROLL
    for (int j = 0; j < kInt8GroupSize / 8; ++j) xv[j] = _mm256_loadu_ps(x + k0 + 8 * j);
    DSCALE_UNROLL
    for (int g = 0; g < kOuts; ++g) {
      const int8_t* wg = wo + g * in + k0;
      const __m256 scale = _mm256_set1_ps(Int8ScaleValue(so[g * groups + group]));
      DSCALE_UNROLL
      for (int j = 0; j < kInt8GroupSize / 8; ++j) {
        acc[g] = _mm256_fmadd_ps(LoadInt8x8(wg + 8 * j, scale), xv[j], acc[g]);
      }
    }
  };
  int64_t grp = 0;
  for (; grp + 2 <= full; grp += 2) {
    Prefetch<kOuts>(wo, so, in, groups, grp);
    group(grp);
    group(grp + 1);
  }
  if (grp < full) group(grp++);
  DSCALE_UNROLL
  for (int g = 0; g < kOuts; ++g) {
    const float sum =
        Sum8(acc[g]) + TailDot(wo + g * in, so + g * groups, x, full * kInt8GroupSize, in);
    Put(y + g, sum, accumulate);
  }
}

DSCALE_AVX2 void TiledAvx2(const float* x, const int8_t* w, const Int8Scale* scales, float* y,
                           int64_t rows, int64_t in, int64_t out, bool accumulate, int64_t o_begin,
                           int64_t o_end) {
  const int64_t groups = Int8Groups(in);
  const int64_t paired = rows - rows % 2;  // in tiles of 2 or 6 rows; an odd last row alone
  int64_t o = o_begin;
  for (; o + kOutGroup <= o_end; o += kOutGroup) {
    const int8_t* wo = w + o * in;
    const Int8Scale* so = scales + o * groups;
    int64_t r = 0;
    for (; r + 6 <= paired; r += 6) {
      TileAvx2<6, 2>(x + r * in, wo, so, in, y + r * out + o, out, accumulate);
      TileAvx2<6, 2>(x + r * in, wo + 2 * in, so + 2 * groups, in, y + r * out + o + 2, out,
                     accumulate);
    }
    for (; r + 2 <= paired; r += 2) {
      TileAvx2<2, kOutGroup>(x + r * in, wo, so, in, y + r * out + o, out, accumulate);
    }
  }
  TiledPortable(x, w, scales, y, paired, in, out, accumulate, o, o_end);
  if (paired == rows) return;
  const float* xr = x + paired * in;
  float* yr = y + paired * out;
  for (o = o_begin; o + kRowOuts <= o_end; o += kRowOuts) {
    RowAvx2<kRowOuts>(xr, w + o * in, scales + o * groups, in, yr + o, accumulate);
  }
  for (; o + kOutGroup <= o_end; o += kOutGroup) {
    RowAvx2<kOutGroup>(xr, w + o * in, scales + o * groups, in, yr + o, accumulate);
  }
  TiledPortable(xr, w, scales, yr, 1, in, out, accumulate, o, o_end);
}

// ---- AVX-512: 16 lanes; tiles of 4 outputs × 2, 4 or 6 rows (up to 24 accumulators of the 32
// registers), and an odd last row in tiles of 8 outputs × 1 row.

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), a deliberately self-initialised
// value its own -Wuninitialized then reports; nothing here reads an undefined lane.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC warning only
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// 16 weights from p, sign-extended and converted.
DSCALE_AVX512 inline __m512 WidenInt8x16(const int8_t* p) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes));
}

// 16 weights from p times the group's scale: fl(w · s).
DSCALE_AVX512 inline __m512 LoadInt8x16(const int8_t* p, float scale) {
  return _mm512_mul_ps(WidenInt8x16(p), _mm512_set1_ps(scale));
}

// kRows ≥ 2 rows of x (row r at x + r·in) against 4 weight rows from `wo` (scales from `so`).
template <int kRows>
DSCALE_AVX512 void TileAvx512(const float* x, const int8_t* wo, const Int8Scale* so, int64_t in,
                              float sums[kRows][kOutGroup]) {
  const int64_t groups = Int8Groups(in), full = in / kInt8GroupSize;
  __m512 acc[kRows][kOutGroup];
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    DSCALE_UNROLL
    for (int g = 0; g < kOutGroup; ++g) acc[r][g] = _mm512_setzero_ps();
  }
  const auto group = [&](int64_t group) DSCALE_AVX512 {
    const int64_t k0 = group * kInt8GroupSize;
    DSCALE_UNROLL
    for (int64_t j = 0; j < kInt8GroupSize; j += 16) {
      __m512 wv[kOutGroup];
      DSCALE_UNROLL
      for (int g = 0; g < kOutGroup; ++g) {
        wv[g] = LoadInt8x16(wo + g * in + k0 + j, Int8ScaleValue(so[g * groups + group]));
      }
      DSCALE_UNROLL
      for (int r = 0; r < kRows; ++r) {
        const __m512 xv = _mm512_loadu_ps(x + r * in + k0 + j);
        DSCALE_UNROLL
        for (int g = 0; g < kOutGroup; ++g) acc[r][g] = _mm512_fmadd_ps(wv[g], xv, acc[r][g]);
      }
    }
  };
  int64_t grp = 0;
  for (; grp + 2 <= full; grp += 2) {
    Prefetch<kOutGroup>(wo, so, in, groups, grp);
    group(grp);
    group(grp + 1);
  }
  if (grp < full) group(grp++);
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    DSCALE_UNROLL
    for (int g = 0; g < kOutGroup; ++g) {
      sums[r][g] = _mm512_reduce_add_ps(acc[r][g]) +
                   TailDot(wo + g * in, so + g * groups, x + r * in, full * kInt8GroupSize, in);
    }
  }
}

template <int kRows>
DSCALE_AVX512 void RowsAvx512(const float* x, const int8_t* wo, const Int8Scale* so, float* y,
                              int64_t in, int64_t out, bool accumulate, int64_t r, int64_t o) {
  float sums[kRows][kOutGroup];
  TileAvx512<kRows>(x + r * in, wo, so, in, sums);
  for (int i = 0; i < kRows; ++i) {
    DSCALE_UNROLL
    for (int g = 0; g < kOutGroup; ++g) Put(y + (r + i) * out + o + g, sums[i][g], accumulate);
  }
}

// One row x against kOuts weight rows from `wo` (scales from `so`); y[g] gets output g. Each
// output is TileAvx512's sum in TileAvx512's order (x times the dequantised weights fl(w·s),
// lane by lane in order of k), so a row gets the same bits alone as in a tile of several rows.
// Scaling each group's partial sum instead would save a multiply per 16 weights but round
// differently from the tiles, and a decode row would then differ from the same row verified.
template <int kOuts>
DSCALE_AVX512 void RowAvx512(const float* x, const int8_t* wo, const Int8Scale* so, int64_t in,
                             float* y, bool accumulate) {
  const int64_t groups = Int8Groups(in), full = in / kInt8GroupSize;
  __m512 acc[kOuts];
  DSCALE_UNROLL
  for (int g = 0; g < kOuts; ++g) acc[g] = _mm512_setzero_ps();
  const auto group = [&](int64_t group) DSCALE_AVX512 {
    const int64_t k0 = group * kInt8GroupSize;
    const __m512 x0 = _mm512_loadu_ps(x + k0), x1 = _mm512_loadu_ps(x + k0 + 16);
    DSCALE_UNROLL
    for (int g = 0; g < kOuts; ++g) {
      const int8_t* wg = wo + g * in + k0;
      const float scale = Int8ScaleValue(so[g * groups + group]);
      acc[g] = _mm512_fmadd_ps(LoadInt8x16(wg, scale), x0, acc[g]);
      acc[g] = _mm512_fmadd_ps(LoadInt8x16(wg + 16, scale), x1, acc[g]);
    }
  };
  int64_t grp = 0;
  for (; grp + 2 <= full; grp += 2) {
    Prefetch<kOuts>(wo, so, in, groups, grp);
    group(grp);
    group(grp + 1);
  }
  if (grp < full) group(grp++);
  DSCALE_UNROLL
  for (int g = 0; g < kOuts; ++g) {
    const float sum = _mm512_reduce_add_ps(acc[g]) +
                      TailDot(wo + g * in, so + g * groups, x, full * kInt8GroupSize, in);
    Put(y + g, sum, accumulate);
  }
}

DSCALE_AVX512 void TiledAvx512(const float* x, const int8_t* w, const Int8Scale* scales, float* y,
                               int64_t rows, int64_t in, int64_t out, bool accumulate,
                               int64_t o_begin, int64_t o_end) {
  const int64_t groups = Int8Groups(in);
  const int64_t paired = rows - rows % 2;  // in tiles of 2 to 6 rows; an odd last row alone
  int64_t o = o_begin;
  for (; o + kOutGroup <= o_end; o += kOutGroup) {
    const int8_t* wo = w + o * in;
    const Int8Scale* so = scales + o * groups;
    int64_t r = 0;
    for (; r + 6 <= paired; r += 6) RowsAvx512<6>(x, wo, so, y, in, out, accumulate, r, o);
    for (; r + 4 <= paired; r += 4) RowsAvx512<4>(x, wo, so, y, in, out, accumulate, r, o);
    for (; r + 2 <= paired; r += 2) RowsAvx512<2>(x, wo, so, y, in, out, accumulate, r, o);
  }
  TiledPortable(x, w, scales, y, paired, in, out, accumulate, o, o_end);
  if (paired == rows) return;
  const float* xr = x + paired * in;
  float* yr = y + paired * out;
  for (o = o_begin; o + kRowOuts <= o_end; o += kRowOuts) {
    RowAvx512<kRowOuts>(xr, w + o * in, scales + o * groups, in, yr + o, accumulate);
  }
  for (; o + kOutGroup <= o_end; o += kOutGroup) {
    RowAvx512<kOutGroup>(xr, w + o * in, scales + o * groups, in, yr + o, accumulate);
  }
  TiledPortable(xr, w, scales, yr, 1, in, out, accumulate, o, o_end);
}

#pragma GCC diagnostic pop

using TiledFn = void (*)(const float*, const int8_t*, const Int8Scale*, float*, int64_t, int64_t,
                         int64_t, bool, int64_t, int64_t);

TiledFn TiledFor(Bf16Isa isa) {
  switch (isa) {
    case Bf16Isa::kAvx512:
      return TiledAvx512;
    case Bf16Isa::kAvx2:
      return TiledAvx2;
    case Bf16Isa::kPortable:
      break;
  }
  return TiledPortable;
}

// The threads split the output columns in blocks of kOutBlock, for blocks of rows (row_blocks.h).
// (The variants take y's row stride where they name it `out`.)
void RunTiled(TiledFn fn, const float* x, const int8_t* w, const Int8Scale* scales, float* y,
              int64_t rows, int64_t in, int64_t out, bool accumulate, int64_t ldy) {
  const int64_t blocks = (out + kOutBlock - 1) / kOutBlock;
  ForRowBlocks(rows, [&](int64_t r0, int64_t n) {
#pragma omp parallel for schedule(static) if (in * out >= kParallelMinWeights)
    for (int64_t b = 0; b < blocks; ++b) {
      fn(x + r0 * in, w, scales, y + r0 * ldy, n, in, ldy, accumulate, b * kOutBlock,
         std::min(out, (b + 1) * kOutBlock));
    }
  });
}

// One row's fl(w · s) values: whole groups 8 at a time, the short last group in plain C++.
DSCALE_AVX2 void DequantizeRowAvx2(const int8_t* w, const Int8Scale* s, int64_t in, float* dst) {
  const int64_t full = in / kInt8GroupSize;
  for (int64_t g = 0; g < full; ++g) {
    const __m256 scale = _mm256_set1_ps(Int8ScaleValue(s[g]));
    DSCALE_UNROLL
    for (int64_t j = 0; j < kInt8GroupSize; j += 8) {
      const int64_t k = g * kInt8GroupSize + j;
      _mm256_storeu_ps(dst + k, LoadInt8x8(w + k, scale));
    }
  }
  for (int64_t k = full * kInt8GroupSize; k < in; ++k) {
    dst[k] = static_cast<float>(w[k]) * Int8ScaleValue(s[k / kInt8GroupSize]);
  }
}

void DequantizeRowPortable(const int8_t* w, const Int8Scale* s, int64_t in, float* dst) {
  for (int64_t k = 0; k < in; ++k)
    dst[k] = static_cast<float>(w[k]) * Int8ScaleValue(s[k / kInt8GroupSize]);
}

void DequantizeAndSgemm(const float* x, const int8_t* w, const Int8Scale* scales, float* y,
                        int64_t rows, int64_t in, int64_t out, bool accumulate, int64_t ldy) {
  DSCALE_CHECK(rows <= std::numeric_limits<blasint>::max() &&
               in <= std::numeric_limits<blasint>::max() &&
               ldy <= std::numeric_limits<blasint>::max());
  // Whole groups of 16 outputs per panel, at least 64 however wide the input (narrower panels
  // leave sgemm too little to block).
  const int64_t panel_outputs =
      std::max<int64_t>(64, kPanelBytes / (in * static_cast<int64_t>(sizeof(float))) / 16 * 16);
  const int64_t groups = Int8Groups(in);
  thread_local std::vector<float> panel;
  panel.resize(static_cast<size_t>(std::min(out, panel_outputs) * in));
  for (int64_t o0 = 0; o0 < out; o0 += panel_outputs) {
    const int64_t n = std::min(panel_outputs, out - o0);
    DequantizeInt8Rows(w + o0 * in, scales + o0 * groups, n, in, panel.data());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(rows),
                static_cast<blasint>(n), static_cast<blasint>(in), 1.0f, x,
                static_cast<blasint>(in), panel.data(), static_cast<blasint>(in),
                accumulate ? 1.0f : 0.0f, y + o0, static_cast<blasint>(ldy));
  }
}

}  // namespace

void DequantizeInt8Rows(const int8_t* w, const Int8Scale* scales, int64_t rows, int64_t in,
                        float* dst) {
  DSCALE_CHECK(rows >= 0 && in >= 0);
  const int64_t groups = Int8Groups(in);
  const bool vector = BestBf16Isa() != Bf16Isa::kPortable;
#pragma omp parallel for schedule(static) if (rows * in >= kParallelMinWeights)
  for (int64_t r = 0; r < rows; ++r) {
    if (vector) {
      DequantizeRowAvx2(w + r * in, scales + r * groups, in, dst + r * in);
    } else {
      DequantizeRowPortable(w + r * in, scales + r * groups, in, dst + r * in);
    }
  }
}

void LinearInt8Tiled(Bf16Isa isa, const float* x, const int8_t* w, const Int8Scale* scales,
                     float* y, int64_t rows, int64_t in, int64_t out, bool accumulate) {
  DSCALE_CHECK(rows >= 0 && in >= 0 && out >= 0);
  CheckBf16IsaSupported(isa);
  RunTiled(TiledFor(isa), x, w, scales, y, rows, in, out, accumulate, out);
}

void LinearInt8DequantSgemm(const float* x, const int8_t* w, const Int8Scale* scales, float* y,
                            int64_t rows, int64_t in, int64_t out, bool accumulate) {
  DSCALE_CHECK(rows > 0 && in > 0 && out > 0);
  DequantizeAndSgemm(x, w, scales, y, rows, in, out, accumulate, out);
}

void LinearInt8(const float* x, const int8_t* w, const Int8Scale* scales, float* y, int64_t rows,
                int64_t in, int64_t out, bool accumulate, int64_t ldy,
                Int8Activations activations) {
  if (activations == Int8Activations::kInt8) {
    return LinearInt8Dot(Int8DotIsaFor(rows, in), x, w, scales, y, rows, in, out, accumulate, ldy);
  }
  if (ldy == 0) ldy = out;
  DSCALE_CHECK(rows >= 0 && in >= 0 && out >= 0 && ldy >= out);
  if (EmptyProductDone(y, rows, in, out, ldy, accumulate)) return;
  RunTiled(TiledFor(BestBf16Isa()), x, w, scales, y, rows, in, out, accumulate, ldy);
}

}  // namespace dscale::cpu
