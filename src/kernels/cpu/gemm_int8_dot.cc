// LinearInt8 with Int8Activations::kInt8: int8 weights × activations quantised per 32 inputs,
// integer dot products per group, f32 accumulation in one fixed order (gemm_int8.h states it).
//
// Layout. The per-group scales make the usual layout (vector lanes along the inputs, one
// horizontal sum per output at the end) cost a horizontal sum per group. So the vector lanes
// hold outputs instead: each group of a panel of L outputs (16 for AVX512-VNNI, 8 for the
// 256-bit variants) is transposed so that one vector holds the same 4 inputs (one dword) of
// every output in the panel; a row's 4 quantised activations are broadcast to every lane, and
// 8 such dot-product steps leave each lane with its output's whole group dot product. Each lane
// then takes the group's term with one FMA, in group order, exactly as the plain loop does, so
// every variant gives the same bits. When all the call's rows fit one tile (AVX-512: up to 16)
// each group is transposed in registers and used at once; otherwise the transposed groups are
// packed, 32 at a time, into a buffer that stays in L1 while every row tile runs over it, the
// lanes' partial sums carried across packs in a small buffer (exact f32 stores).
//
// Unsigned × signed. vpdpbusd multiplies unsigned bytes by signed bytes. The VNNI variants store
// the packed weights offset by 128 (w ^ 0x80 = w + 128, in 0 … 255) and broadcast the signed
// activations: Σ (w + 128)·x = Σ w·x + 128·Σx, and Σx per row and group comes with the
// quantiser, so each group's dot product starts from −128·Σx and needs no extra instruction per
// step. (The other standard trick, |x| against sign(x)·w, costs a sign operation per row and step
// here, and AVX-512 has no vpsignb.) The AVX2 variant cannot take the offset: vpmaddubsw adds
// pairs of u8 × s8 products in saturating int16, and 2 · 255 · 127 = 64,770 would saturate. It
// uses the sign trick instead: |x| (unsigned) against sign(x)·w, and since the quantisers never
// produce −128, |x| ≤ 127 and |sign(x)·w| ≤ 127, so a pair sums to at most 2 · 127 · 127 =
// 32,258 < 32,767: vpmaddubsw never saturates, and vpmaddwd by ones widens the pairs exactly.

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_int4.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/gemm_int8_amx.h"
#include "kernels/cpu/int8_avx2.h"
#include "kernels/cpu/int8_vnni512.h"
#include "kernels/cpu/isa_targets.h"
#include "kernels/cpu/row_blocks.h"

namespace dscale::cpu {
namespace {

using avx2::SumInt32Lanes;
using avx2::SumLanesOf8;
using avx2::WidenScales8;

using vnni512::GroupVnni512;
using vnni512::Load32;

constexpr int64_t kGroup = kInt8GroupSize;
static_assert(kGroup == 32, "the packing takes groups of 32");
// Dwords (4 inputs) per group: the dot-product steps of a group.
constexpr int kSteps = vnni512::kSteps;
// Below this many weights a call runs on one thread: a fork/join would cost more than the work.
constexpr int64_t kParallelMinWeights = int64_t{1} << 16;
// Groups packed at a time: 32 groups of a 16-output panel are 16 KiB, which stay in L1 while
// the rows run over them.
constexpr int64_t kPackGroups = 32;
// Rows per tile at most (more rows go in the fewest tiles of heights differing by at most one),
// accumulators in registers: the 256-bit variants' tiles hold 8 (of 16 registers), the AVX-512
// ones 16 (of 32, beside a group's weight vectors, a few spilled), so a verified block of up to
// 16 rows runs in one unpacked pass, each group transposed once (faster than packing for two
// tiles: docs/BENCHMARKS.md, "Measurements behind the kernels' constants").
constexpr int kMaxTileRows256 = 8;
// Calls of at most this many rows run the AVX2 variant on the weights as they lie, one output at
// a time (FewRowsAvx2); more pack them: where the two cross on an AVX2-only Zen 3 EPYC, with the
// packer fetching the next panel in memory order (PrefetchNextPanel; the runs: docs/BENCHMARKS.md,
// "Measurements behind the kernels' constants").
constexpr int kFewRowsAvx2 = 5;
constexpr int kMaxTileRows512 = 16;
static_assert(kInt4Vnni512MaxRows <= kMaxTileRows512, "a 4-bit call's rows fit one tile");
// Lanes (outputs) of a panel.
constexpr int kLanes512 = vnni512::kLanes;
constexpr int kLanes256 = 8;
// How far ahead along each of a panel's rows the 512-bit packer prefetches, once per 64-byte line
// (every second group; the 256-bit packer fetches the next panel instead: PrefetchNextPanel). The
// panel reads 8 or 16 rows at once, which the hardware prefetchers alone do not keep fed from
// memory; 1 KiB (the f32 tiles' distance) slowed packing weights that sit in L3
// (docs/BENCHMARKS.md, "Measurements behind the kernels' constants").
constexpr int64_t kPrefetchBytes = 256;

#define DSCALE_UNROLL _Pragma("GCC unroll 16")

inline void Put(float* y, float value, bool accumulate) { *y = accumulate ? *y + value : value; }

// The quantised activations of a call (gemm_int8.h).
using QuantRows = Int8ActivationRows;

// ---- Portable: each output's groups in order, straight from the row-major weights.

void DotPortable(const QuantRows& xq, int64_t rows, const int8_t* w, const Int8Scale* scales,
                 int64_t in, int64_t o_begin, int64_t o_end, float* y, int64_t ldy,
                 bool accumulate) {
  const int64_t groups = xq.groups;
  for (int64_t o = o_begin; o < o_end; ++o) {
    const int8_t* wo = w + o * in;
    for (int64_t r = 0; r < rows; ++r) {
      const int8_t* xr = xq.q + r * groups * kGroup;
      float acc = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t end = std::min(in, (g + 1) * kGroup);
        int32_t dot = 0;
        for (int64_t k = g * kGroup; k < end; ++k) dot += int32_t{xr[k]} * int32_t{wo[k]};
        const float p = xq.scale[r * groups + g] * Int8ScaleValue(scales[o * groups + g]);
        acc = std::fma(p, static_cast<float>(dot), acc);
      }
      Put(y + r * ldy + o, acc, accumulate);
    }
  }
}

// ---- Packing. A packed group is kSteps vectors of L lanes × 4 bytes: step s, lane l holds
// inputs 4s … 4s + 3 of the group for output l of the panel. Its scales are L floats (widened
// from the weights' BF16). Lanes past the panel's outputs and inputs past `in` hold zero weights
// (and scale 0); `flip` stores w ^ 0x80 (the VNNI offset).

// Where a panel's weights come from: outputs [o0, o0 + n) of w [out, in] and their scales.
struct Panel {
  const int8_t* w;          // row o0
  const Int8Scale* scales;  // row o0
  int64_t in, groups;
  int n;  // outputs in the panel, ≤ L
  // The call has rows after the panel's, so the scale after its last row's last one exists.
  bool scales_follow;
};

// At group g of a whole panel of L rows: every second group (one 64-byte line of each row), a
// prefetch kPrefetchBytes ahead in each row (past a row's end: into the next row, or a harmless
// hint past the weights). Always inlined: out of line, GCC 12 finds a function of prefetches
// alone free of side effects and deletes its calls.
template <int L>
[[gnu::always_inline]] inline void PrefetchPanel(const Panel& p, int64_t g) {
  if (g % 2 != 0) return;
  DSCALE_UNROLL
  for (int l = 0; l < L; ++l) {
    _mm_prefetch(reinterpret_cast<const char*>(p.w + l * p.in + g * kGroup + kPrefetchBytes),
                 _MM_HINT_T0);
  }
}

// At group g of a whole panel of L rows: the next panel's L · 32 bytes at the same distance from
// its start (4 lines for L = 8), into L2. The L rows of a panel lie one after another, so over
// the panel's groups this walks the next panel front to back as one sequential stream, and its
// packing then reads the rows side by side from L2. Packing side by side from memory, as
// PrefetchPanel feeds it, reads 8 streams at once, which Zen 3 serves at about half the rate of
// one (the few-rows kernel's comment; the runs: docs/BENCHMARKS.md, "Measurements behind the
// kernels' constants").
template <int L>
[[gnu::always_inline]] inline void PrefetchNextPanel(const Panel& p, int64_t g) {
  const int8_t* next = p.w + L * p.in + g * L * kGroup;
  DSCALE_UNROLL
  for (int line = 0; line < L * kGroup / 64; ++line) {
    _mm_prefetch(reinterpret_cast<const char*>(next + line * 64), _MM_HINT_T1);
  }
}

template <int L>
void PackGroupPortable(const Panel& p, int64_t g, bool flip, int8_t* dst, float* dst_scales) {
  for (int s = 0; s < kSteps; ++s) {
    for (int l = 0; l < L; ++l) {
      for (int b = 0; b < 4; ++b) {
        const int64_t k = g * kGroup + 4 * s + b;
        const int8_t v = l < p.n && k < p.in ? p.w[l * p.in + k] : int8_t{0};
        dst[(s * L + l) * 4 + b] = flip ? static_cast<int8_t>(v ^ 0x80) : v;
      }
    }
  }
  for (int l = 0; l < L; ++l) {
    dst_scales[l] = l < p.n ? Int8ScaleValue(p.scales[l * p.groups + g]) : 0.0f;
  }
}

// Group g's scales of a whole panel of L outputs, widened to f32: one per row, `groups` apart.
template <int L>
inline void WidenPanelScales(const Panel& p, int64_t g, float* dst) {
  DSCALE_UNROLL
  for (int l = 0; l < L; ++l) dst[l] = Int8ScaleValue(p.scales[l * p.groups + g]);
}

// ---- 256-bit packing: 8 outputs, an 8 × 8 dword transpose per group.

// The group at `src` (row l at src + l·in) transposed into 8 vectors, dword s of every row in
// vector s.
DSCALE_AVX2 inline void Transpose8(const int8_t* src, int64_t in, __m256i out[kSteps]) {
  __m256i t[8], u[8];
  DSCALE_UNROLL
  for (int l = 0; l < 8; l += 2) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + l * in));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + (l + 1) * in));
    t[l] = _mm256_unpacklo_epi32(a, b);      // per 128 bits: a0 b0 a1 b1
    t[l + 1] = _mm256_unpackhi_epi32(a, b);  // a2 b2 a3 b3
  }
  DSCALE_UNROLL
  for (int h = 0; h < 8; h += 4) {                         // rows 0-3, then 4-7
    u[h] = _mm256_unpacklo_epi64(t[h], t[h + 2]);          // dword 0 (and 4) of 4 rows
    u[h + 1] = _mm256_unpackhi_epi64(t[h], t[h + 2]);      // 1 (5)
    u[h + 2] = _mm256_unpacklo_epi64(t[h + 1], t[h + 3]);  // 2 (6)
    u[h + 3] = _mm256_unpackhi_epi64(t[h + 1], t[h + 3]);  // 3 (7)
  }
  DSCALE_UNROLL
  for (int s = 0; s < 4; ++s) {
    out[s] = _mm256_permute2x128_si256(u[s], u[4 + s], 0x20);
    out[s + 4] = _mm256_permute2x128_si256(u[s], u[4 + s], 0x31);
  }
}

template <bool kFlip>
DSCALE_AVX2 void PackChunk256(const Panel& p, int64_t g0, int64_t ng, int8_t* dst,
                              float* dst_scales) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t j = 0; j < ng; ++j) {
    const int64_t g = g0 + j;
    int8_t* d = dst + j * kSteps * kLanes256 * 4;
    float* ds = dst_scales + j * kLanes256;
    if (p.n < kLanes256 || (g + 1) * kGroup > p.in) {
      PackGroupPortable<kLanes256>(p, g, kFlip, d, ds);
      continue;
    }
    PrefetchNextPanel<kLanes256>(p, g);
    __m256i v[kSteps];
    Transpose8(p.w + g * kGroup, p.in, v);
    DSCALE_UNROLL
    for (int s = 0; s < kSteps; ++s) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + s * 32),
                          kFlip ? _mm256_xor_si256(v[s], flip) : v[s]);
    }
    WidenPanelScales<kLanes256>(p, g, ds);
  }
}

// ---- AVX2: |x| × sign(x)·w with vpmaddubsw, pairs widened by vpmaddwd (bounds: top of file).

template <int kRows>
DSCALE_AVX2 void TileAvx2(const QuantRows& xq, int64_t r0, int64_t g0, int64_t ng,
                          const int8_t* packed, const float* ps, float* acc, bool first) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 a[kRows];
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    a[r] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + r * kLanes256);
  }
  for (int64_t j = 0; j < ng; ++j) {
    const int64_t g = g0 + j;
    const int8_t* pw = packed + j * kSteps * kLanes256 * 4;
    const __m256 dw = _mm256_loadu_ps(ps + j * kLanes256);
    DSCALE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const int64_t row = r0 + r;
      const int8_t* xr = xq.q + (row * xq.groups + g) * kGroup;
      __m256i dot = _mm256_setzero_si256();
      DSCALE_UNROLL
      for (int s = 0; s < kSteps; ++s) {
        const __m256i xb = _mm256_set1_epi32(Load32(xr + 4 * s));
        const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pw + s * 32));
        const __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(xb), _mm256_sign_epi8(wv, xb));
        dot = _mm256_add_epi32(dot, _mm256_madd_epi16(pairs, ones));
      }
      const __m256 p = _mm256_mul_ps(dw, _mm256_set1_ps(xq.scale[row * xq.groups + g]));
      a[r] = _mm256_fmadd_ps(p, _mm256_cvtepi32_ps(dot), a[r]);
    }
  }
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) _mm256_storeu_ps(acc + r * kLanes256, a[r]);
}

// ---- AVX2, few rows: the weights as they lie, one output at a time. For one or two rows the
// packed layout's transpose costs more than the products it feeds, and its 8 outputs read as 8
// interleaved streams, which Zen 3 fetches from memory at about half the rate of one sequential
// stream (docs/BENCHMARKS.md). Here each output's row is read front to back: 8 groups at a time,
// each multiplied with the row's group in the sign trick's vpmaddubsw + vpmaddwd, their int32 lanes
// summed by one exact integer reduction into the 8 groups' dot_g, and the output takes them with
// the same FMAs in the same group order as every other variant, so the bits do not change.

// One group's 8 int32 lanes of Σ q_x · q_w: |x| against sign(x)·w (bounds: top of file).
DSCALE_AVX2 inline __m256i GroupLanesAvx2(__m256i xb, __m256i wv) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(xb), _mm256_sign_epi8(wv, xb)),
                           _mm256_set1_epi16(1));
}

DSCALE_AVX2 inline __m256i Load256(const int8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// How far ahead of its loads the one-output kernel prefetches its stream: the weights' pages are
// 4 KiB, where the hardware prefetchers stop (gemm_bf16.cc's single stream does the same). Past a
// row's end the lines are the next output's, which follows in memory. 4 KiB was the fastest of
// 1-8 KiB on a Zen 3 EPYC (docs/BENCHMARKS.md, "Measurements behind the kernels' constants").
constexpr int64_t kOneOutputPrefetchBytes = 4096;

// acc[r] for rows [0, kRows) against one output: its weights wo[in], scales so[groups].
template <int kRows>
DSCALE_AVX2 void OneOutputAvx2(const QuantRows& xq, const int8_t* wo, const Int8Scale* so,
                               int64_t in, float acc[kRows]) {
  const int64_t groups = xq.groups, full = in / kGroup;
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) acc[r] = 0.0f;
  int64_t g = 0;
  for (; g + 8 <= full; g += 8) {
    DSCALE_UNROLL
    for (int line = 0; line < 4; ++line) {  // 8 groups: 4 lines of 64 bytes
      _mm_prefetch(
          reinterpret_cast<const char*>(wo + g * kGroup + line * 64 + kOneOutputPrefetchBytes),
          _MM_HINT_T0);
    }
    __m256i wv[8];
    DSCALE_UNROLL
    for (int j = 0; j < 8; ++j) wv[j] = Load256(wo + (g + j) * kGroup);
    const __m256 dw = WidenScales8(so + g);
    DSCALE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const int8_t* xr = xq.q + (r * groups + g) * kGroup;
      __m256i d[8];
      DSCALE_UNROLL
      for (int j = 0; j < 8; ++j) d[j] = GroupLanesAvx2(Load256(xr + j * kGroup), wv[j]);
      alignas(32) float dots[8], terms[8];
      _mm256_store_ps(dots, _mm256_cvtepi32_ps(SumLanesOf8(d)));
      _mm256_store_ps(terms, _mm256_mul_ps(dw, _mm256_loadu_ps(xq.scale + r * groups + g)));
      DSCALE_UNROLL
      for (int j = 0; j < 8; ++j) acc[r] = std::fma(terms[j], dots[j], acc[r]);
    }
  }
  for (; g < groups; ++g) {  // the last groups one at a time; a short last group read padded
    alignas(32) int8_t tail[kGroup] = {};
    const int8_t* wg = wo + g * kGroup;
    if (g == full) {
      std::memcpy(tail, wg, static_cast<size_t>(in - g * kGroup));
      wg = tail;
    }
    const __m256i wv = Load256(wg);
    DSCALE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const __m256i lanes = GroupLanesAvx2(Load256(xq.q + (r * groups + g) * kGroup), wv);
      const float term = Int8ScaleValue(so[g]) * xq.scale[r * groups + g];
      acc[r] = std::fma(term, static_cast<float>(SumInt32Lanes(lanes)), acc[r]);
    }
  }
}

// Rows [0, kRows) of the call against a panel's outputs, one at a time: acc[r · 8 + l].
template <int kRows>
DSCALE_AVX2 void FewRowsAvx2(const QuantRows& xq, const Panel& p, float* acc) {
  for (int l = 0; l < p.n; ++l) {
    float out[kRows];
    OneOutputAvx2<kRows>(xq, p.w + l * p.in, p.scales + l * p.groups, p.in, out);
    DSCALE_UNROLL
    for (int r = 0; r < kRows; ++r) acc[r * kLanes256 + l] = out[r];
  }
}

// ---- AVX-VNNI: 256-bit vpdpbusd on the offset weights.

template <int kRows>
DSCALE_AVXVNNI void TileAvxVnni(const QuantRows& xq, int64_t r0, int64_t g0, int64_t ng,
                                const int8_t* packed, const float* ps, float* acc, bool first) {
  __m256 a[kRows];
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    a[r] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + r * kLanes256);
  }
  for (int64_t j = 0; j < ng; ++j) {
    const int64_t g = g0 + j;
    const int8_t* pw = packed + j * kSteps * kLanes256 * 4;
    const __m256 dw = _mm256_loadu_ps(ps + j * kLanes256);
    DSCALE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const int64_t row = r0 + r;
      const int8_t* xr = xq.q + (row * xq.groups + g) * kGroup;
      __m256i dot = _mm256_set1_epi32(-128 * xq.sum[row * xq.groups + g]);
      DSCALE_UNROLL
      for (int s = 0; s < kSteps; ++s) {
        const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pw + s * 32));
        dot = _mm256_dpbusd_avx_epi32(dot, wv, _mm256_set1_epi32(Load32(xr + 4 * s)));
      }
      const __m256 p = _mm256_mul_ps(dw, _mm256_set1_ps(xq.scale[row * xq.groups + g]));
      a[r] = _mm256_fmadd_ps(p, _mm256_cvtepi32_ps(dot), a[r]);
    }
  }
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) _mm256_storeu_ps(acc + r * kLanes256, a[r]);
}

// ---- AVX512-VNNI: 16 outputs, 512-bit vpdpbusd on the offset weights.

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), a deliberately self-initialised
// value its own -Wuninitialized then reports; nothing here reads an undefined lane.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC warning only
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// The group at `src` (row l at src + l·in) for 16 rows transposed into 8 vectors, dword s of
// every row in vector s, lane l = row l. Rows pair up as (0, 4), (1, 5), (2, 6), (3, 7),
// (8, 12), … in the 256-bit halves, so that after the 8 × 8 transposes within the halves the
// final 128-bit shuffles leave the lanes in row order.
DSCALE_AVX512VNNI inline void Transpose16(const int8_t* src, int64_t in, __m512i out[kSteps]) {
  const auto row = [&](int l) DSCALE_AVX512VNNI {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + l * in));
  };
  static constexpr int kLow[8] = {0, 1, 2, 3, 8, 9, 10, 11};
  __m512i z[8], t[8], u[8];
  DSCALE_UNROLL
  for (int j = 0; j < 8; ++j) {
    z[j] = _mm512_inserti64x4(_mm512_castsi256_si512(row(kLow[j])), row(kLow[j] + 4), 1);
  }
  DSCALE_UNROLL
  for (int j = 0; j < 8; j += 2) {
    t[j] = _mm512_unpacklo_epi32(z[j], z[j + 1]);
    t[j + 1] = _mm512_unpackhi_epi32(z[j], z[j + 1]);
  }
  DSCALE_UNROLL
  for (int h = 0; h < 8; h += 4) {
    u[h] = _mm512_unpacklo_epi64(t[h], t[h + 2]);
    u[h + 1] = _mm512_unpackhi_epi64(t[h], t[h + 2]);
    u[h + 2] = _mm512_unpacklo_epi64(t[h + 1], t[h + 3]);
    u[h + 3] = _mm512_unpackhi_epi64(t[h + 1], t[h + 3]);
  }
  // u[s]: dword s of rows 0-3 | s + 4 of 0-3 | s of 4-7 | s + 4 of 4-7 (128-bit lanes); u[4 + s]
  // the same for rows 8-15.
  DSCALE_UNROLL
  for (int s = 0; s < 4; ++s) {
    out[s] = _mm512_shuffle_i64x2(u[s], u[4 + s], 0x88);      // lanes 0, 2 of each
    out[s + 4] = _mm512_shuffle_i64x2(u[s], u[4 + s], 0xdd);  // lanes 1, 3 of each
  }
}

DSCALE_AVX512VNNI void PackChunk512(const Panel& p, int64_t g0, int64_t ng, int8_t* dst,
                                    float* dst_scales) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t j = 0; j < ng; ++j) {
    const int64_t g = g0 + j;
    int8_t* d = dst + j * kSteps * kLanes512 * 4;
    float* ds = dst_scales + j * kLanes512;
    if (p.n < kLanes512 || (g + 1) * kGroup > p.in) {
      PackGroupPortable<kLanes512>(p, g, /*flip=*/true, d, ds);
      continue;
    }
    PrefetchPanel<kLanes512>(p, g);
    __m512i v[kSteps];
    Transpose16(p.w + g * kGroup, p.in, v);
    DSCALE_UNROLL
    for (int s = 0; s < kSteps; ++s) _mm512_storeu_si512(d + s * 64, _mm512_xor_si512(v[s], flip));
    WidenPanelScales<kLanes512>(p, g, ds);
  }
}

// Group g's scales of a whole panel of 16 outputs (lane l at element idx[l] = l·groups), widened
// to f32: one 32-bit gather at 2-byte steps reads each scale with the next one in its upper half,
// which the shift drops. Lane 15's read passes the panel's last scale by one element, which only
// a panel with rows after it may do; the last panel widens its scales one by one.
DSCALE_AVX512VNNI inline __m512 PanelScales512(const Panel& p, int64_t g, __m512i idx) {
  if (!p.scales_follow && g + 1 == p.groups) {
    alignas(64) float dw[kLanes512];
    WidenPanelScales<kLanes512>(p, g, dw);
    return _mm512_load_ps(dw);
  }
  const __m512i pairs = _mm512_i32gather_epi32(idx, p.scales + g, sizeof(Int8Scale));
  return _mm512_castsi512_ps(_mm512_slli_epi32(pairs, 16));
}

template <int kRows>
DSCALE_AVX512VNNI void TileVnni512(const QuantRows& xq, int64_t r0, int64_t g0, int64_t ng,
                                   const int8_t* packed, const float* ps, float* acc, bool first) {
  __m512 a[kRows];
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    a[r] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + r * kLanes512);
  }
  for (int64_t j = 0; j < ng; ++j) {
    const int8_t* pw = packed + j * kSteps * kLanes512 * 4;
    __m512i wv[kSteps];
    DSCALE_UNROLL
    for (int s = 0; s < kSteps; ++s) wv[s] = _mm512_loadu_si512(pw + s * 64);
    GroupVnni512<kRows>(xq, r0, g0 + j, wv, _mm512_loadu_ps(ps + j * kLanes512), a);
  }
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) _mm512_storeu_ps(acc + r * kLanes512, a[r]);
}

// All rows (kRows ≤ kMaxTileRows512, one tile) against a whole panel of 16 outputs, each group
// transposed in registers and used at once: with one tile there is nothing to share a pack
// with, and storing and reloading it slowed a decode row (docs/BENCHMARKS.md).
// The same terms in the same order as the packed path. Each group fetches the next panel's bytes
// at the same distance from its start into L2 (PrefetchNextPanel), so that memory serves one
// sequential stream and the panel's 16 rows are read side by side from L2: fetching the 16 rows
// side by side from memory (PrefetchPanel) read 22-23 GB/s at one row of 2,048 inputs on the
// 2-vCPU Zen 4 EPYC, the next panel's stream 33-45 (docs/BENCHMARKS.md, "AMD Zen 4: the limits,
// the kernels against them, and llama.cpp").
template <int kRows>
DSCALE_AVX512VNNI void UnpackedVnni512(const QuantRows& xq, const Panel& p, float* acc) {
  const __m512i idx =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int32_t>(p.groups)));
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 a[kRows];
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) a[r] = _mm512_setzero_ps();
  const int64_t full = p.in / kGroup;
  for (int64_t g = 0; g < full; ++g) {
    PrefetchNextPanel<kLanes512>(p, g);
    __m512i wv[kSteps];
    Transpose16(p.w + g * kGroup, p.in, wv);
    DSCALE_UNROLL
    for (int s = 0; s < kSteps; ++s) wv[s] = _mm512_xor_si512(wv[s], flip);
    GroupVnni512<kRows>(xq, 0, g, wv, PanelScales512(p, g, idx), a);
  }
  if (full < p.groups) {  // the short last group, through the portable packer
    alignas(64) int8_t packed[kSteps * kLanes512 * 4];
    alignas(64) float ps[kLanes512];
    PackGroupPortable<kLanes512>(p, full, /*flip=*/true, packed, ps);
    __m512i wv[kSteps];
    DSCALE_UNROLL
    for (int s = 0; s < kSteps; ++s) wv[s] = _mm512_load_si512(packed + s * 64);
    GroupVnni512<kRows>(xq, 0, full, wv, _mm512_load_ps(ps), a);
  }
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) _mm512_storeu_ps(acc + r * kLanes512, a[r]);
}

// ---- 4-bit weights on AVX512-VNNI (gemm_int4.h's format: byte j of a group holds inputs j and
// 16 + j as nibbles q + 8). A group of 16 outputs is 16 rows × 16 bytes: transposed as
// Transpose16 transposes int8 groups, dword s of every output in one vector, then its low nibbles
// are step s (inputs 4s … 4s + 3) and its high ones step s + 4 (inputs 16 + 4s …), unsigned
// q + 8 against the signed activations, each group's dot product corrected by −8 · Σ q_x. The
// terms are then the int8 path's in its order: every output has the bits the unpacked matrix
// gives through LinearInt8Dot.

// Outputs of a 4-bit panel: row o at w4 + o · row_bytes, scales `groups` apart.
struct Int4Panel {
  const uint8_t* w4;
  const Int8Scale* scales;
  int64_t row_bytes, groups;
  bool scales_follow;  // as Panel's
};

// Group g of 16 rows as the 8 steps' vectors (lane l = row l). Row i + 4j goes to 128-bit lane j
// of load i, so that the 4 × 4 dword transposes within the lanes leave lane 4j + i holding row
// 4j + i.
DSCALE_AVX512VNNI inline void TransposeNibbles16(const uint8_t* src, int64_t row_bytes,
                                                 __m512i out[kSteps]) {
  const auto row = [&](int l) DSCALE_AVX512VNNI {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + l * row_bytes));
  };
  __m512i z[4];
  DSCALE_UNROLL
  for (int i = 0; i < 4; ++i) {
    z[i] = _mm512_castsi128_si512(row(i));
    z[i] = _mm512_inserti32x4(z[i], row(4 + i), 1);
    z[i] = _mm512_inserti32x4(z[i], row(8 + i), 2);
    z[i] = _mm512_inserti32x4(z[i], row(12 + i), 3);
  }
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  const __m512i dwords[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                             _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
  const __m512i low = _mm512_set1_epi8(0x0f);
  DSCALE_UNROLL
  for (int s = 0; s < 4; ++s) {
    out[s] = _mm512_and_si512(dwords[s], low);
    out[s + 4] = _mm512_and_si512(_mm512_srli_epi16(dwords[s], 4), low);
  }
}

// Every row (kRows ≤ kMaxTileRows512) against a panel of 16 4-bit outputs, group by group. A
// panel's 16 rows lie one after another, groups · 256 bytes in all, so each group fetches 256
// bytes of the next panel into L2, front to back: the next panel arrives as one sequential
// stream (prefetching 16 rows side by side a few groups ahead, as the int8 packer does, ran 1.4×
// slower at one row on the 2-vCPU Zen 5). Each gather of scales reads two groups' (the BF16
// scale of group g and g + 1 share a dword), halving the gathers.
template <int kRows>
DSCALE_AVX512VNNI void Int4Vnni512(const QuantRows& xq, const Int4Panel& p, float* acc) {
  const __m512i idx =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int32_t>(p.groups)));
  // The scales' view PanelScales512 reads (it reads no weights).
  const Panel scales{.w = nullptr,
                     .scales = p.scales,
                     .in = 0,
                     .groups = p.groups,
                     .n = kLanes512,
                     .scales_follow = p.scales_follow};
  constexpr int64_t kGroupBytes = kGroup / 2;
  __m512 a[kRows];
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) a[r] = _mm512_setzero_ps();
  constexpr int64_t kPanelGroupBytes = kLanes512 * kGroupBytes;  // 256: 4 lines
  const char* next_panel = reinterpret_cast<const char*>(p.w4 + kLanes512 * p.row_bytes);
  __m512 dw_next = _mm512_setzero_ps();
  for (int64_t g = 0; g < p.groups; ++g) {
    DSCALE_UNROLL
    for (int64_t line = 0; line < kPanelGroupBytes; line += 64) {
      _mm_prefetch(next_panel + g * kPanelGroupBytes + line, _MM_HINT_T1);
    }
    __m512i wv[kSteps];
    TransposeNibbles16(p.w4 + g * kGroupBytes, p.row_bytes, wv);
    __m512 dw;
    if (g % 2 == 1) {
      dw = dw_next;
    } else if (g + 1 < p.groups) {
      const __m512i two = _mm512_i32gather_epi32(idx, p.scales + g, sizeof(Int8Scale));
      dw = _mm512_castsi512_ps(_mm512_slli_epi32(two, 16));
      dw_next = _mm512_castsi512_ps(
          _mm512_and_si512(two, _mm512_set1_epi32(static_cast<int32_t>(0xffff0000u))));
    } else {
      dw = PanelScales512(scales, g, idx);
    }
    GroupVnni512<kRows, 8>(xq, 0, g, wv, dw, a);
  }
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) _mm512_storeu_ps(acc + r * kLanes512, a[r]);
}

#pragma GCC diagnostic pop

// ---- One panel of outputs for every row, any packed variant.

using PackFn = void (*)(const Panel&, int64_t g0, int64_t ng, int8_t* dst, float* dst_scales);
using TileFn = void (*)(int rows, const QuantRows&, int64_t r0, int64_t g0, int64_t ng,
                        const int8_t* packed, const float* ps, float* acc, bool first);
// All of a call's rows (at most the variant's max_rows) against a whole panel, without packing.
using UnpackedFn = void (*)(int rows, const QuantRows&, const Panel&, float* acc);

struct PackedVariant {
  int lanes;
  PackFn pack;
  TileFn tile;
  UnpackedFn unpacked;    // null: the variant always packs
  int max_rows;           // rows per tile at most
  int unpacked_max_rows;  // calls of at most this many rows run `unpacked`
};

void TileAvx2Rows(int rows, const QuantRows& xq, int64_t r0, int64_t g0, int64_t ng,
                  const int8_t* packed, const float* ps, float* acc, bool first) {
  WithRows<kMaxTileRows256>(
      rows, [&]<int kRows>() { TileAvx2<kRows>(xq, r0, g0, ng, packed, ps, acc, first); });
}
void TileAvxVnniRows(int rows, const QuantRows& xq, int64_t r0, int64_t g0, int64_t ng,
                     const int8_t* packed, const float* ps, float* acc, bool first) {
  WithRows<kMaxTileRows256>(
      rows, [&]<int kRows>() { TileAvxVnni<kRows>(xq, r0, g0, ng, packed, ps, acc, first); });
}
void TileVnni512Rows(int rows, const QuantRows& xq, int64_t r0, int64_t g0, int64_t ng,
                     const int8_t* packed, const float* ps, float* acc, bool first) {
  WithRows<kMaxTileRows512>(
      rows, [&]<int kRows>() { TileVnni512<kRows>(xq, r0, g0, ng, packed, ps, acc, first); });
}

void FewRowsAvx2Rows(int rows, const QuantRows& xq, const Panel& p, float* acc) {
  WithRows<kFewRowsAvx2>(rows, [&]<int kRows>() { FewRowsAvx2<kRows>(xq, p, acc); });
}

void UnpackedVnni512Rows(int rows, const QuantRows& xq, const Panel& p, float* acc) {
  WithRows<kMaxTileRows512>(rows, [&]<int kRows>() { UnpackedVnni512<kRows>(xq, p, acc); });
}

PackedVariant PackedFor(Int8DotIsa isa) {
  switch (isa) {
    case Int8DotIsa::kAvx512Vnni:
      return {kLanes512,           PackChunk512,    TileVnni512Rows,
              UnpackedVnni512Rows, kMaxTileRows512, kMaxTileRows512};
    case Int8DotIsa::kAvxVnni:
      return {kLanes256, PackChunk256<true>, TileAvxVnniRows, nullptr, kMaxTileRows256, 0};
    case Int8DotIsa::kAvx2:
    case Int8DotIsa::kPortable:
    case Int8DotIsa::kAmx:  // not packed here: gemm_int8_amx.cc
      break;
  }
  return {kLanes256,       PackChunk256<false>, TileAvx2Rows,
          FewRowsAvx2Rows, kMaxTileRows256,     kFewRowsAvx2};
}

// Outputs [o0, o0 + n) (n ≤ v.lanes) of every row: the groups packed kPackGroups at a time, each
// pack run by every row tile, the lanes' partial sums kept in `acc` between packs.
void RunPanel(const PackedVariant& v, const QuantRows& xq, int64_t rows, const Panel& panel,
              int64_t o0, float* y, int64_t ldy, bool accumulate) {
  thread_local std::vector<int8_t> packed;
  thread_local std::vector<float> packed_scales;
  thread_local std::vector<float> acc;
  acc.resize(static_cast<size_t>(rows * v.lanes));
  if (v.unpacked != nullptr && rows <= v.unpacked_max_rows && panel.n == v.lanes) {
    v.unpacked(static_cast<int>(rows), xq, panel, acc.data());
    for (int64_t r = 0; r < rows; ++r) {
      for (int l = 0; l < panel.n; ++l) Put(y + r * ldy + o0 + l, acc[r * v.lanes + l], accumulate);
    }
    return;
  }
  packed.resize(static_cast<size_t>(kPackGroups * kSteps * v.lanes * 4));
  packed_scales.resize(static_cast<size_t>(kPackGroups * v.lanes));
  for (int64_t g0 = 0; g0 < panel.groups; g0 += kPackGroups) {
    const int64_t ng = std::min(kPackGroups, panel.groups - g0);
    v.pack(panel, g0, ng, packed.data(), packed_scales.data());
    ForEachRowTile(rows, v.max_rows, [&](int64_t r0, int height) {
      v.tile(height, xq, r0, g0, ng, packed.data(), packed_scales.data(), acc.data() + r0 * v.lanes,
             /*first=*/g0 == 0);
    });
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int l = 0; l < panel.n; ++l) Put(y + r * ldy + o0 + l, acc[r * v.lanes + l], accumulate);
  }
}

void RunDot(Int8DotIsa isa, const QuantRows& xq, int64_t rows, const int8_t* w,
            const Int8Scale* scales, int64_t in, int64_t out, float* y, int64_t ldy,
            bool accumulate) {
  const int64_t groups = xq.groups;
  if (isa == Int8DotIsa::kAmx) {
    LinearAmxInt8(xq.q, xq.scale, rows, w, scales, in, out, y, ldy, accumulate);
    return;
  }
  if (isa == Int8DotIsa::kPortable) {
    constexpr int64_t kBlock = 8;
    const int64_t blocks = (out + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (in * out >= kParallelMinWeights)
    for (int64_t b = 0; b < blocks; ++b) {
      DotPortable(xq, rows, w, scales, in, b * kBlock, std::min(out, (b + 1) * kBlock), y, ldy,
                  accumulate);
    }
    return;
  }
  const PackedVariant v = PackedFor(isa);
  const int64_t panels = (out + v.lanes - 1) / v.lanes;
#pragma omp parallel for schedule(static) if (in * out >= kParallelMinWeights)
  for (int64_t b = 0; b < panels; ++b) {
    const int64_t o0 = b * v.lanes;
    const Panel panel{.w = w + o0 * in,
                      .scales = scales + o0 * groups,
                      .in = in,
                      .groups = groups,
                      .n = static_cast<int>(std::min<int64_t>(v.lanes, out - o0)),
                      .scales_follow = o0 + v.lanes < out};
    RunPanel(v, xq, rows, panel, o0, y, ldy, accumulate);
  }
}

const std::vector<Int8DotIsa>& DotIsas() {
  static const std::vector<Int8DotIsa> isas = SupportedInt8DotIsas(CpuFeaturesInUse());
  return isas;
}

void CheckDotIsaSupported(Int8DotIsa isa) {
  const std::vector<Int8DotIsa>& supported = DotIsas();
  DSCALE_CHECK_MSG(std::find(supported.begin(), supported.end(), isa) != supported.end(),
                   "this CPU cannot run the requested int8 dot-product variant");
}

// The quantised activations of the calling thread's current call (read by every thread of it).
thread_local std::vector<int8_t> quant_values;
thread_local std::vector<float> quant_scales;
thread_local std::vector<int32_t> quant_sums;

}  // namespace

std::string_view Int8ActivationsName(Int8Activations activations) {
  return activations == Int8Activations::kInt8 ? "int8" : "f32";
}

std::optional<Int8Activations> Int8ActivationsFromName(std::string_view name) {
  if (name == "int8") return Int8Activations::kInt8;
  if (name == "f32") return Int8Activations::kF32;
  return std::nullopt;
}

std::string_view Int8DotIsaName(Int8DotIsa isa) {
  switch (isa) {
    case Int8DotIsa::kAmx:
      return "amx";
    case Int8DotIsa::kAvx512Vnni:
      return "avx512vnni";
    case Int8DotIsa::kAvxVnni:
      return "avxvnni";
    case Int8DotIsa::kAvx2:
      return "avx2";
    case Int8DotIsa::kPortable:
      break;
  }
  return "portable";
}

std::vector<Int8DotIsa> SupportedInt8DotIsas() { return DotIsas(); }

bool HasInt8DotIsa(Int8DotIsa isa) {
  const std::vector<Int8DotIsa>& isas = DotIsas();
  return std::find(isas.begin(), isas.end(), isa) != isas.end();
}

std::vector<Int8DotIsa> SupportedInt8DotIsas(CpuIsaCap cap) {
  return SupportedInt8DotIsas(CpuFeaturesFor(cap));
}

std::vector<Int8DotIsa> SupportedInt8DotIsas(const CpuFeatures& features) {
  std::vector<Int8DotIsa> found = {Int8DotIsa::kPortable};
  if (!features.Avx2Fma()) return found;
  found.push_back(Int8DotIsa::kAvx2);
  if (features.avx_vnni) found.push_back(Int8DotIsa::kAvxVnni);
  if (features.Avx512() && features.avx512_vnni) found.push_back(Int8DotIsa::kAvx512Vnni);
  if (HasAmxInt8(features)) found.push_back(Int8DotIsa::kAmx);
  return found;
}

Int8DotIsa BestInt8DotIsa() { return DotIsas().back(); }

Int8ActivationRows QuantizeInt8ActivationRows(const float* x, int64_t rows, int64_t in) {
  const int64_t groups = Int8Groups(in);
  quant_values.resize(static_cast<size_t>(rows * groups * kGroup));
  quant_scales.resize(static_cast<size_t>(rows * groups));
  quant_sums.resize(static_cast<size_t>(rows * groups));
  // Rows are quantised independently; many rows (prefill) share the work across the threads.
  int8_t* q = quant_values.data();
  float* qs = quant_scales.data();
  int32_t* sums = quant_sums.data();
#pragma omp parallel for schedule(static) if (rows * in >= kParallelMinWeights)
  for (int64_t r = 0; r < rows; ++r) {
    QuantizeInt8Activations(x + r * in, 1, in, q + r * groups * kGroup, qs + r * groups,
                            sums + r * groups);
  }
  return {.q = q, .scale = qs, .sum = sums, .groups = groups};
}

void LinearInt8DotQuantized(Int8DotIsa isa, const Int8ActivationRows& xq, int64_t rows,
                            const int8_t* w, const Int8Scale* scales, int64_t in, int64_t out,
                            float* y, int64_t ldy, bool accumulate) {
  DSCALE_CHECK(rows >= 0 && in > 0 && out >= 0 && ldy >= out && xq.groups == Int8Groups(in));
  CheckDotIsaSupported(isa);
  if (rows == 0 || out == 0) return;
  RunDot(isa, xq, rows, w, scales, in, out, y, ldy, accumulate);
}

int64_t LinearInt4Vnni512(const Int8ActivationRows& xq, int64_t rows, const uint8_t* w4,
                          const Int8Scale* scales, int64_t in, int64_t out, float* y, int64_t ldy,
                          bool accumulate) {
  DSCALE_CHECK(rows >= 1 && rows <= kInt4Vnni512MaxRows && xq.groups == Int8Groups(in));
  CheckDotIsaSupported(Int8DotIsa::kAvx512Vnni);
  const int64_t panels = out / kLanes512, groups = xq.groups, row_bytes = groups * (kGroup / 2);
#pragma omp parallel for schedule(static) if (in * out >= kParallelMinWeights)
  for (int64_t b = 0; b < panels; ++b) {
    const int64_t o0 = b * kLanes512;
    const Int4Panel panel{.w4 = w4 + o0 * row_bytes,
                          .scales = scales + o0 * groups,
                          .row_bytes = row_bytes,
                          .groups = groups,
                          .scales_follow = o0 + kLanes512 < out};
    alignas(64) float acc[kMaxTileRows512 * kLanes512];
    WithRows<kMaxTileRows512>(static_cast<int>(rows),
                              [&]<int kRows>() { Int4Vnni512<kRows>(xq, panel, acc); });
    for (int64_t r = 0; r < rows; ++r) {
      for (int l = 0; l < kLanes512; ++l)
        Put(y + r * ldy + o0 + l, acc[r * kLanes512 + l], accumulate);
    }
  }
  return panels * kLanes512;
}

Int8DotIsa Int8DotIsaFor(int64_t rows, int64_t in) {
  const std::vector<Int8DotIsa>& isas = DotIsas();
  if (isas.back() != Int8DotIsa::kAmx || rows >= kAmxInt8MinRows) return isas.back();
  if (rows == 1 && in <= kInt8OneRowAvx2MaxIn) return Int8DotIsa::kAvx2;
  return isas[isas.size() - 2];
}

void LinearInt8Dot(Int8DotIsa isa, const float* x, const int8_t* w, const Int8Scale* scales,
                   float* y, int64_t rows, int64_t in, int64_t out, bool accumulate, int64_t ldy) {
  if (ldy == 0) ldy = out;
  DSCALE_CHECK(rows >= 0 && in >= 0 && out >= 0 && ldy >= out);
  CheckDotIsaSupported(isa);
  if (EmptyProductDone(y, rows, in, out, ldy, accumulate)) return;
  const QuantRows xq = QuantizeInt8ActivationRows(x, rows, in);
  RunDot(isa, xq, rows, w, scales, in, out, y, ldy, accumulate);
}

}  // namespace dscale::cpu
