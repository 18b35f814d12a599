// The 4-bit panel layout (gemm_int4.h): packing the rows layout into it, and reading outputs
// back out of it as packed rows or unpacked int8 values (the AMX tiles and the unpacked chunks
// multiply those; WeightMatrix reads single rows).

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/gemm_int4.h"
#include "kernels/cpu/isa_targets.h"

namespace dscale::cpu {
namespace {

constexpr int64_t kGroup = kInt8GroupSize;
constexpr int64_t kGroupBytes = kGroup / 2;
constexpr int64_t kLanes = kQuantPanelOutputs;
// A packed group's dwords: step s of output l lies at dword 16s + l of the panel's group.
constexpr int64_t kStepsPerGroup = kGroupBytes / 4;

// Where output `o` of w lies: its panel and lane.
struct PanelLane {
  int64_t panel;
  int64_t lane;
};
PanelLane LaneOf(const Int4Matrix& w, int64_t o) {
  return {(w.first + o) / kLanes, (w.first + o) % kLanes};
}

// Output `lane` of one panel as a packed row and its scales.
void PanelRow(const uint8_t* panel, const Int8Scale* panel_scales, int64_t groups, int64_t lane,
              uint8_t* row, Int8Scale* scales) {
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t s = 0; s < kStepsPerGroup; ++s) {
      std::memcpy(row + g * kGroupBytes + 4 * s,
                  panel + g * kInt4PanelGroupBytes + 64 * s + 4 * lane, 4);
    }
    scales[g] = panel_scales[g * kLanes + lane];
  }
}

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), a deliberately self-initialised
// value its own -Wuninitialized then reports; nothing here reads an undefined lane.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC warning only
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// A whole panel's 16 outputs unpacked to int8 rows dst[16, in]: each group's 4 step vectors
// transposed 4 × 4 within their 128-bit lanes, which leaves 128-bit lane q of vector i holding
// the packed bytes of output 4q + i, then split into low and high nibbles, each output's two
// halves paired into 32 bytes and stored.
DSCALE_AVX512VNNI void UnpackPanelAvx512(const uint8_t* panel, int64_t in, int8_t* dst) {
  const int64_t groups = Int8Groups(in);
  const __m512i low_nibbles = _mm512_set1_epi8(0x0f), offset = _mm512_set1_epi8(8);
  // Outputs 4q + i and 4(q + 1) + i: low half q, high half q, low half q + 1, high half q + 1.
  const __m512i first_pair = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i second_pair = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  alignas(64) int8_t last[kLanes][kGroup];  // the short last group, staged
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* pg = panel + g * kInt4PanelGroupBytes;
    __m512i v[4];
    for (int s = 0; s < 4; ++s) v[s] = _mm512_loadu_si512(pg + 64 * s);
    const __m512i t0 = _mm512_unpacklo_epi32(v[0], v[1]), t1 = _mm512_unpackhi_epi32(v[0], v[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(v[2], v[3]), t3 = _mm512_unpackhi_epi32(v[2], v[3]);
    const __m512i u[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                          _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
    const bool short_group = (g + 1) * kGroup > in;
    const auto out = [&](int64_t l) { return short_group ? last[l] : dst + l * in + g * kGroup; };
    for (int i = 0; i < 4; ++i) {
      const __m512i lo = _mm512_sub_epi8(_mm512_and_si512(u[i], low_nibbles), offset);
      const __m512i hi =
          _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(u[i], 4), low_nibbles), offset);
      const __m512i a = _mm512_permutex2var_epi64(lo, first_pair, hi);
      const __m512i b = _mm512_permutex2var_epi64(lo, second_pair, hi);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out(i)), _mm512_castsi512_si256(a));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out(4 + i)), _mm512_extracti64x4_epi64(a, 1));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out(8 + i)), _mm512_castsi512_si256(b));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out(12 + i)), _mm512_extracti64x4_epi64(b, 1));
    }
    if (short_group) {
      for (int64_t l = 0; l < kLanes; ++l) {
        std::memcpy(dst + l * in + g * kGroup, last[l], static_cast<size_t>(in - g * kGroup));
      }
    }
  }
}

#pragma GCC diagnostic pop

// Outputs [l0, l1) of one panel unpacked into dst[l1 − l0, in] and their scales.
void UnpackPanelLanes(const uint8_t* panel, const Int8Scale* panel_scales, int64_t in, int64_t l0,
                      int64_t l1, int8_t* dst, Int8Scale* dst_scales, bool vector) {
  const int64_t groups = Int8Groups(in);
  for (int64_t l = l0; l < l1; ++l) {
    for (int64_t g = 0; g < groups; ++g) {
      dst_scales[(l - l0) * groups + g] = panel_scales[g * kLanes + l];
    }
  }
  if (vector && l0 == 0 && l1 == kLanes) return UnpackPanelAvx512(panel, in, dst);
  if (vector) {
    thread_local std::vector<int8_t> whole;
    whole.resize(static_cast<size_t>(kLanes * in));
    UnpackPanelAvx512(panel, in, whole.data());
    std::memcpy(dst, whole.data() + l0 * in, static_cast<size_t>((l1 - l0) * in));
    return;
  }
  std::vector<uint8_t> row(static_cast<size_t>(Int4RowBytes(in)));
  std::vector<Int8Scale> unused(static_cast<size_t>(groups));
  for (int64_t l = l0; l < l1; ++l) {
    PanelRow(panel, panel_scales, groups, l, row.data(), unused.data());
    UnpackInt4Rows(row.data(), 1, in, dst + (l - l0) * in, /*vector=*/false);
  }
}

}  // namespace

void PackInt4Panels(const uint8_t* w4, const Int8Scale* scales, int64_t rows, int64_t in,
                    uint8_t* panels, Int8Scale* panel_scales) {
  DSCALE_CHECK(rows >= 0 && in >= 0);
  const int64_t groups = Int8Groups(in), row_bytes = Int4RowBytes(in);
  for (int64_t p = 0; p < QuantPanels(0, rows); ++p) {
    uint8_t* panel = panels + p * Int4PanelBytes(in);
    Int8Scale* ps = panel_scales + p * QuantPanelScales(in);
    for (int64_t l = 0; l < kLanes; ++l) {
      const int64_t o = p * kLanes + l;
      for (int64_t g = 0; g < groups; ++g) {
        for (int64_t s = 0; s < kStepsPerGroup; ++s) {
          uint8_t* at = panel + g * kInt4PanelGroupBytes + 64 * s + 4 * l;
          if (o < rows) {
            std::memcpy(at, w4 + o * row_bytes + g * kGroupBytes + 4 * s, 4);
          } else {
            std::memset(at, 0x88, 4);  // q = 0 in both nibbles
          }
        }
        ps[g * kLanes + l] = o < rows ? scales[o * groups + g] : Int8Scale{0};
      }
    }
  }
}

void Int4RowOf(const Int4Matrix& w, int64_t in, int64_t o, uint8_t* row, Int8Scale* scales) {
  const int64_t groups = Int8Groups(in);
  if (w.layout == QuantLayout::kRows) {
    std::memcpy(row, w.values + o * Int4RowBytes(in), static_cast<size_t>(Int4RowBytes(in)));
    std::memcpy(scales, w.scales + o * groups, static_cast<size_t>(groups) * sizeof(Int8Scale));
    return;
  }
  const PanelLane at = LaneOf(w, o);
  PanelRow(w.values + at.panel * Int4PanelBytes(in), w.scales + at.panel * QuantPanelScales(in),
           groups, at.lane, row, scales);
}

void UnpackInt4Outputs(const Int4Matrix& w, int64_t in, int64_t o0, int64_t n, int8_t* dst,
                       Int8Scale* dst_scales, bool vector) {
  DSCALE_CHECK(o0 >= 0 && n >= 0 && in >= 0);
  const int64_t groups = Int8Groups(in);
  if (w.layout == QuantLayout::kRows) {
    UnpackInt4Rows(w.values + o0 * Int4RowBytes(in), n, in, dst, vector);
    std::memcpy(dst_scales, w.scales + o0 * groups,
                static_cast<size_t>(n * groups) * sizeof(Int8Scale));
    return;
  }
  const bool avx512 = vector && HasInt8DotIsa(Int8DotIsa::kAvx512Vnni);
  for (int64_t o = o0; o < o0 + n;) {
    const PanelLane at = LaneOf(w, o);
    const int64_t l1 = std::min(kLanes, at.lane + (o0 + n - o));
    UnpackPanelLanes(w.values + at.panel * Int4PanelBytes(in),
                     w.scales + at.panel * QuantPanelScales(in), in, at.lane, l1,
                     dst + (o - o0) * in, dst_scales + (o - o0) * groups, avx512);
    o += l1 - at.lane;
  }
}

}  // namespace dscale::cpu
