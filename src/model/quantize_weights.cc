#include "model/quantize_weights.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/gemm_int4.h"
#include "kernels/cpu/gemm_int8.h"

namespace dscale {
namespace {

// `w`'s rows quantised on the threads by quantise(row, cols, dst_row, scales_row) into
// rows · row_bytes values of type T and their scales.
template <typename T, typename Quantise>
std::pair<HugePageArray<T>, HugePageArray<cpu::Int8Scale>> QuantizeRows(const WeightMatrix& w,
                                                                        int64_t row_bytes,
                                                                        Quantise quantise) {
  const int64_t rows = w.rows(), cols = w.cols(), groups = cpu::Int8Groups(cols);
  // Not zeroed: the threads' first writes fault the pages in, each its own rows (zeroing them
  // first, on one thread, was 0.5-1 s of a 1.7B model's 4 s load). On huge pages, as the BF16
  // weights are (resident_weights.h).
  auto q = MakeHugePageArray<T>(static_cast<size_t>(rows * row_bytes));
  auto scales = MakeHugePageArray<cpu::Int8Scale>(static_cast<size_t>(rows * groups));
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(cols));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      w.RowToF32(r, row.data());
      quantise(row.data(), cols, q.get() + r * row_bytes, scales.get() + r * groups);
    }
  }
  return {std::move(q), std::move(scales)};
}

// `w`'s rows quantised in the rows layout by quantise(row, cols, dst_row, scales_row), each panel
// of 16 on its thread, then packed into place by pack(values, scales, n, cols, panel,
// panel_scales) (cpu::PackInt8Panels, cpu::PackInt4Panels): row_bytes values of type T per row,
// panel_bytes per panel.
template <typename T, typename Quantise, typename Pack>
std::pair<HugePageArray<T>, HugePageArray<cpu::Int8Scale>> QuantizePanels(
    const WeightMatrix& w, int64_t row_bytes, int64_t panel_bytes, Quantise quantise, Pack pack) {
  const int64_t rows = w.rows(), cols = w.cols(), panels = cpu::QuantPanels(0, rows);
  const int64_t lanes = cpu::kQuantPanelOutputs, groups = cpu::Int8Groups(cols);
  auto q = MakeHugePageArray<T>(static_cast<size_t>(panels * panel_bytes));
  auto scales =
      MakeHugePageArray<cpu::Int8Scale>(static_cast<size_t>(panels * cpu::QuantPanelScales(cols)));
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(cols));
    std::vector<T> values(static_cast<size_t>(lanes * row_bytes));
    std::vector<cpu::Int8Scale> row_scales(static_cast<size_t>(lanes * groups));
#pragma omp for schedule(static)
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t n = std::min(lanes, rows - p * lanes);
      for (int64_t l = 0; l < n; ++l) {
        w.RowToF32(p * lanes + l, row.data());
        quantise(row.data(), cols, values.data() + l * row_bytes, row_scales.data() + l * groups);
      }
      pack(values.data(), row_scales.data(), n, cols, q.get() + p * panel_bytes,
           scales.get() + p * cpu::QuantPanelScales(cols));
    }
  }
  return {std::move(q), std::move(scales)};
}

void QuantizeInt8Row(const float* row, int64_t cols, int8_t* dst, cpu::Int8Scale* scales) {
  cpu::QuantizeInt8Weights(row, 1, cols, dst, scales);
}
void QuantizeInt4Row(const float* row, int64_t cols, uint8_t* dst, cpu::Int8Scale* scales) {
  cpu::QuantizeInt4Weights(row, 1, cols, dst, scales);
}

}  // namespace

WeightMatrix QuantizeInt8(const WeightMatrix& w, cpu::Int8Activations activations) {
  return QuantizeInt8(w, cpu::PreferredInt8Layout(activations));
}

WeightMatrix QuantizeInt8(const WeightMatrix& w, cpu::QuantLayout layout) {
  auto [q, scales] = layout == cpu::QuantLayout::kRows
                         ? QuantizeRows<int8_t>(w, w.cols(), QuantizeInt8Row)
                         : QuantizePanels<int8_t>(w, w.cols(), cpu::Int8PanelBytes(w.cols()),
                                                  QuantizeInt8Row, cpu::PackInt8Panels);
  return WeightMatrix::FromInt8(std::move(q), std::move(scales), w.rows(), w.cols(), layout);
}

WeightMatrix QuantizeInt4(const WeightMatrix& w) {
  return QuantizeInt4(w, cpu::PreferredInt4Layout());
}

WeightMatrix QuantizeInt4(const WeightMatrix& w, cpu::QuantLayout layout) {
  const int64_t row_bytes = cpu::Int4RowBytes(w.cols());
  auto [q, scales] = layout == cpu::QuantLayout::kRows
                         ? QuantizeRows<uint8_t>(w, row_bytes, QuantizeInt4Row)
                         : QuantizePanels<uint8_t>(w, row_bytes, cpu::Int4PanelBytes(w.cols()),
                                                   QuantizeInt4Row, cpu::PackInt4Panels);
  return WeightMatrix::FromInt4(std::move(q), std::move(scales), w.rows(), w.cols(), layout);
}

void QuantizeLayer(DecoderLayerWeights* layer, WeightsMode mode, cpu::Int8Activations activations) {
  DSCALE_CHECK(IsQuantized(mode));
  ForEachProjection(*layer, [&](WeightMatrix& m) {
    m = mode == WeightsMode::kInt4 ? QuantizeInt4(m) : QuantizeInt8(m, activations);
  });
}

void QuantizeProjections(DecoderWeights* weights, WeightsMode mode,
                         cpu::Int8Activations activations) {
  for (DecoderLayerWeights& layer : weights->layers) QuantizeLayer(&layer, mode, activations);
  weights->lm_head = QuantizeInt8(weights->LmHead(), activations);
}

}  // namespace dscale
