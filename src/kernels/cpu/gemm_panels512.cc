// The kernels on the panel layouts (gemm_int8.h: int8; gemm_int4.h: 4-bit) for CPUs with
// AVX512-VNNI: a group of 16 outputs lies as its dot-product steps' vectors, read front to back
// with one prefetch stream and no transposes (the rows layout's kernels, gemm_int8_dot.cc,
// transpose every group in registers on every call). One template for both formats; the terms
// are gemm_int8.h's in its order (int8_vnni512.h), so every output has the bits LinearInt8Dot
// gives on the same values.

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/gemm_int4.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/int8_vnni512.h"
#include "kernels/cpu/isa_targets.h"
#include "kernels/cpu/row_blocks.h"

namespace dscale::cpu {
namespace {

using vnni512::GroupVnni512;
using vnni512::kSteps;
using QuantRows = Int8ActivationRows;

constexpr int kLanes512 = vnni512::kLanes;
// Rows per tile at most: 16 accumulators of 32 registers, beside a group's 8 weight vectors.
constexpr int kMaxTileRows512 = 16;
static_assert(kInt4Vnni512MaxRows <= kMaxTileRows512, "a 4-bit call's rows fit one tile");
// Groups a panel's tiles run over at a time when a call has more rows than one tile: 32 int8
// groups of 16 outputs are 16 KiB, which stay in L1 while every tile runs (the packed rows
// layout's choice, gemm_int8_dot.cc).
constexpr int64_t kTileGroups = 32;
// Below this many weights a call runs on one thread (as the int8 kernels decide).
constexpr int64_t kParallelMinWeights = int64_t{1} << 16;

#define DSCALE_UNROLL _Pragma("GCC unroll 16")

inline void Put(float* y, float value, bool accumulate) { *y = accumulate ? *y + value : value; }

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), a deliberately self-initialised
// value its own -Wuninitialized then reports; nothing here reads an undefined lane.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC warning only
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// A group's step vectors. int8: 8 vectors, step s in vector s, offset by 128 as stored. 4-bit: 4
// vectors, low nibbles step s and high ones step s + 4 (the vectors gemm_int8_dot.cc's
// TransposeNibbles16 builds from rows), offset by 8. Scales: one 32-byte load a group.

struct Int8PanelSteps {
  static constexpr int64_t kBytes = kInt8PanelGroupBytes;
  static constexpr int kOffset = 128;
  [[gnu::always_inline]] DSCALE_AVX512VNNI static inline void Load(const uint8_t* pg,
                                                                   __m512i wv[kSteps]) {
    DSCALE_UNROLL
    for (int s = 0; s < kSteps; ++s) wv[s] = _mm512_loadu_si512(pg + 64 * s);
  }
};

struct Int4PanelSteps {
  static constexpr int64_t kBytes = kInt4PanelGroupBytes;
  static constexpr int kOffset = 8;
  [[gnu::always_inline]] DSCALE_AVX512VNNI static inline void Load(const uint8_t* pg,
                                                                   __m512i wv[kSteps]) {
    const __m512i low = _mm512_set1_epi8(0x0f);
    DSCALE_UNROLL
    for (int s = 0; s < 4; ++s) {
      const __m512i v = _mm512_loadu_si512(pg + 64 * s);
      wv[s] = _mm512_and_si512(v, low);
      wv[s + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
    }
  }
};

// How far ahead of its loads a panel kernel prefetches its one stream, into L1: 2 KiB (the fused
// 4-bit kernel's distance, with which the 4-bit layout's one-row prototype read its weights at
// 0.9 of the read bandwidth; int8 panels read best from 2 to 4 KiB ahead on the Zen 4 EPYC).
constexpr int64_t kPanelPrefetchBytes = 2048;

// Rows [r0, r0 + kRows) against groups [g0, g0 + ng) of one panel (`panel` and `scales` at its
// group 0): acc[kRows][16] from zero when `first`, else carried on from acc.
template <int kRows, typename Steps>
DSCALE_AVX512VNNI void PanelGroups512(const QuantRows& xq, int64_t r0, const uint8_t* panel,
                                      const Int8Scale* scales, int64_t g0, int64_t ng, float* acc,
                                      bool first) {
  __m512 a[kRows];
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    a[r] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + r * kLanes512);
  }
  for (int64_t g = g0; g < g0 + ng; ++g) {
    const uint8_t* pg = panel + g * Steps::kBytes;
    DSCALE_UNROLL
    for (int64_t line = 0; line < Steps::kBytes; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(pg + kPanelPrefetchBytes + line), _MM_HINT_T0);
    }
    __m512i wv[kSteps];
    Steps::Load(pg, wv);
    const __m256i bits =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + g * kQuantPanelOutputs));
    const __m512 dw = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
    GroupVnni512<kRows, Steps::kOffset>(xq, r0, g, wv, dw, a);
  }
  DSCALE_UNROLL
  for (int r = 0; r < kRows; ++r) _mm512_storeu_ps(acc + r * kLanes512, a[r]);
}

#pragma GCC diagnostic pop

}  // namespace

void Int4PanelGroups512(const Int8ActivationRows& xq, int64_t r0, int64_t rows,
                        const uint8_t* panel, const Int8Scale* scales, int64_t g0, int64_t ng,
                        float* acc, bool first) {
  DSCALE_CHECK(rows >= 1 && rows <= kInt4Vnni512MaxRows && g0 >= 0 && g0 + ng <= xq.groups);
  WithRows<kMaxTileRows512>(static_cast<int>(rows), [&]<int kRows>() {
    PanelGroups512<kRows, Int4PanelSteps>(xq, r0, panel, scales, g0, ng, acc, first);
  });
}

namespace {

// Every row against panels [0, QuantPanels(first, out)) of `Steps`' format, each panel on one
// thread: up to 16 rows in one pass over its groups; more in tiles over kTileGroups groups at a
// time (their bytes stay in L1 while every tile runs), the lanes' sums carried between them.
template <typename Steps>
void RunPanels512(const Int8ActivationRows& xq, int64_t rows, const uint8_t* panels,
                  const Int8Scale* panel_scales, int64_t first, int64_t in, int64_t out,
                  int64_t panel_bytes, float* y, int64_t ldy, bool accumulate) {
  static_assert(kQuantPanelOutputs == kLanes512);
  DSCALE_CHECK(rows >= 1 && xq.groups == Int8Groups(in) && first >= 0 &&
               first < kQuantPanelOutputs);
  DSCALE_CHECK_MSG(HasInt8DotIsa(Int8DotIsa::kAvx512Vnni),
                   "the panel kernels need AVX512-VNNI, which this CPU lacks");
  const int64_t count = QuantPanels(first, out), groups = xq.groups;
#pragma omp parallel for schedule(static) if (in * out >= kParallelMinWeights)
  for (int64_t b = 0; b < count; ++b) {
    thread_local std::vector<float> sums;
    sums.resize(static_cast<size_t>(rows * kLanes512));
    float* acc = sums.data();
    const uint8_t* panel = panels + b * panel_bytes;
    const Int8Scale* scales = panel_scales + b * QuantPanelScales(in);
    const auto tile = [&](int64_t r0, int height, int64_t g0, int64_t ng) {
      WithRows<kMaxTileRows512>(height, [&]<int kRows>() {
        PanelGroups512<kRows, Steps>(xq, r0, panel, scales, g0, ng, acc + r0 * kLanes512, g0 == 0);
      });
    };
    if (rows <= kMaxTileRows512) {
      tile(0, static_cast<int>(rows), 0, groups);
    } else {
      for (int64_t g0 = 0; g0 < groups; g0 += kTileGroups) {
        const int64_t ng = std::min(kTileGroups, groups - g0);
        ForEachRowTile(rows, kMaxTileRows512,
                       [&](int64_t r0, int height) { tile(r0, height, g0, ng); });
      }
    }
    // Lane l is output b·16 + l − first; the first and last panels may hold others' lanes.
    const int64_t o0 = b * kLanes512 - first;
    const int l0 = static_cast<int>(std::max<int64_t>(0, -o0));
    const int l1 = static_cast<int>(std::min<int64_t>(kLanes512, out - o0));
    for (int64_t r = 0; r < rows; ++r) {
      for (int l = l0; l < l1; ++l) Put(y + r * ldy + o0 + l, acc[r * kLanes512 + l], accumulate);
    }
  }
}

}  // namespace

void LinearInt4Panels512(const Int8ActivationRows& xq, int64_t rows, const uint8_t* panels,
                         const Int8Scale* panel_scales, int64_t first, int64_t in, int64_t out,
                         float* y, int64_t ldy, bool accumulate) {
  DSCALE_CHECK(rows <= kInt4Vnni512MaxRows);
  RunPanels512<Int4PanelSteps>(xq, rows, panels, panel_scales, first, in, out, Int4PanelBytes(in),
                               y, ldy, accumulate);
}

void LinearInt8Panels512(const Int8ActivationRows& xq, int64_t rows, const int8_t* panels,
                         const Int8Scale* panel_scales, int64_t first, int64_t in, int64_t out,
                         float* y, int64_t ldy, bool accumulate) {
  RunPanels512<Int8PanelSteps>(xq, rows, reinterpret_cast<const uint8_t*>(panels), panel_scales,
                               first, in, out, Int8PanelBytes(in), y, ldy, accumulate);
}

}  // namespace dscale::cpu
