// The int8 panel layout (gemm_int8.h): packing the rows layout into it, reading outputs back out
// of it in the rows layout (WeightMatrix's single rows, the unpacked chunks), and LinearInt8 on a
// matrix in either layout.

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/quant_chunks.h"

namespace dscale::cpu {
namespace {

constexpr int64_t kGroup = kInt8GroupSize;
constexpr int64_t kLanes = kQuantPanelOutputs;
// Dot-product steps (4 inputs each) of a group.
constexpr int64_t kSteps = kGroup / 4;
// The stored byte of value w, and back (gemm_int8.h: w + 128 as an unsigned byte).
constexpr uint8_t kFlip = 0x80;

// Output `lane` of one panel in the rows layout: `in` values and Int8Groups(in) scales.
void PanelLaneRow(const int8_t* panel, const Int8Scale* panel_scales, int64_t in, int64_t lane,
                  int8_t* row, Int8Scale* scales) {
  const int64_t groups = Int8Groups(in);
  for (int64_t g = 0; g < groups; ++g) {
    const int8_t* pg = panel + g * kInt8PanelGroupBytes + 4 * lane;
    const int64_t n = std::min(kGroup, in - g * kGroup);
    for (int64_t i = 0; i < n; ++i) {
      row[g * kGroup + i] = static_cast<int8_t>(pg[64 * (i / 4) + i % 4] ^ kFlip);
    }
    scales[g] = panel_scales[g * kLanes + lane];
  }
}

}  // namespace

std::string_view QuantLayoutName(QuantLayout layout) {
  return layout == QuantLayout::kPanels ? "panels" : "rows";
}

QuantLayout PreferredInt8Layout(Int8Activations activations) {
  const bool panels =
      activations == Int8Activations::kInt8 && BestInt8DotIsa() == Int8DotIsa::kAvx512Vnni;
  return panels ? QuantLayout::kPanels : QuantLayout::kRows;
}

void PackInt8Panels(const int8_t* w, const Int8Scale* scales, int64_t rows, int64_t in,
                    int8_t* panels, Int8Scale* panel_scales) {
  DSCALE_CHECK(rows >= 0 && in >= 0);
  const int64_t groups = Int8Groups(in);
  for (int64_t p = 0; p < QuantPanels(0, rows); ++p) {
    int8_t* panel = panels + p * Int8PanelBytes(in);
    Int8Scale* ps = panel_scales + p * QuantPanelScales(in);
    for (int64_t l = 0; l < kLanes; ++l) {
      const int64_t o = p * kLanes + l;
      for (int64_t g = 0; g < groups; ++g) {
        for (int64_t s = 0; s < kSteps; ++s) {
          int8_t* at = panel + g * kInt8PanelGroupBytes + 64 * s + 4 * l;
          const int64_t i = g * kGroup + 4 * s;
          if (o < rows && i + 4 <= in) {  // four values at once, each flipped
            uint32_t four;
            std::memcpy(&four, w + o * in + i, 4);
            four ^= 0x80808080u;
            std::memcpy(at, &four, 4);
            continue;
          }
          for (int64_t b = 0; b < 4; ++b) {
            const int8_t value = o < rows && i + b < in ? w[o * in + i + b] : int8_t{0};
            at[b] = static_cast<int8_t>(value ^ kFlip);
          }
        }
        ps[g * kLanes + l] = o < rows ? scales[o * groups + g] : Int8Scale{0};
      }
    }
  }
}

void Int8OutputsOf(const Int8Matrix& w, int64_t in, int64_t o0, int64_t n, int8_t* dst,
                   Int8Scale* dst_scales) {
  DSCALE_CHECK(o0 >= 0 && n >= 0 && in >= 0);
  const int64_t groups = Int8Groups(in);
  if (w.layout == QuantLayout::kRows) {
    std::memcpy(dst, w.values + o0 * in, static_cast<size_t>(n * in));
    std::memcpy(dst_scales, w.scales + o0 * groups,
                static_cast<size_t>(n * groups) * sizeof(Int8Scale));
    return;
  }
  for (int64_t o = o0; o < o0 + n; ++o) {
    const int64_t lane = w.first + o;
    PanelLaneRow(w.values + lane / kLanes * Int8PanelBytes(in),
                 w.scales + lane / kLanes * QuantPanelScales(in), in, lane % kLanes,
                 dst + (o - o0) * in, dst_scales + (o - o0) * groups);
  }
}

void LinearInt8(const float* x, const Int8Matrix& w, float* y, int64_t rows, int64_t in,
                int64_t out, bool accumulate, int64_t ldy, Int8Activations activations) {
  if (w.layout == QuantLayout::kRows) {
    return LinearInt8(x, w.values, w.scales, y, rows, in, out, accumulate, ldy, activations);
  }
  if (ldy == 0) ldy = out;
  DSCALE_CHECK(rows >= 0 && in >= 0 && out >= 0 && ldy >= out);
  if (EmptyProductDone(y, rows, in, out, ldy, accumulate)) return;
  const bool int8_dot = activations == Int8Activations::kInt8;
  const Int8ActivationRows xq =
      int8_dot ? QuantizeInt8ActivationRows(x, rows, in) : Int8ActivationRows{};
  if (int8_dot && HasInt8DotIsa(Int8DotIsa::kAvx512Vnni)) {
    return LinearInt8Panels512(xq, rows, w.values, w.scales, w.first, in, out, y, ldy, accumulate);
  }
  UnpackedChunks(
      x, xq, rows,
      [&](int64_t o0, int64_t n, int8_t* dst, Int8Scale* dst_scales) {
        Int8OutputsOf(w, in, o0, n, dst, dst_scales);
      },
      in, out, y, ldy, accumulate, int8_dot);
}

}  // namespace dscale::cpu
