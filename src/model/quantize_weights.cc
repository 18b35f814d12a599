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

}  // namespace

WeightMatrix QuantizeInt8(const WeightMatrix& w) {
  auto [q, scales] = QuantizeRows<int8_t>(
      w, w.cols(), [](const float* row, int64_t cols, int8_t* dst, cpu::Int8Scale* s) {
        cpu::QuantizeInt8Weights(row, 1, cols, dst, s);
      });
  return WeightMatrix::FromInt8(std::move(q), std::move(scales), w.rows(), w.cols());
}

WeightMatrix QuantizeInt4(const WeightMatrix& w) {
  return QuantizeInt4(w, cpu::PreferredInt4Layout());
}

WeightMatrix QuantizeInt4(const WeightMatrix& w, cpu::Int4Layout layout) {
  if (layout == cpu::Int4Layout::kRows) {
    auto [q, scales] =
        QuantizeRows<uint8_t>(w, cpu::Int4RowBytes(w.cols()),
                              [](const float* row, int64_t cols, uint8_t* dst, cpu::Int8Scale* s) {
                                cpu::QuantizeInt4Weights(row, 1, cols, dst, s);
                              });
    return WeightMatrix::FromInt4(std::move(q), std::move(scales), w.rows(), w.cols());
  }
  // Each panel's rows quantised in the rows layout on its thread, then packed into place.
  const int64_t rows = w.rows(), cols = w.cols(), panels = cpu::Int4Panels(0, rows);
  const int64_t lanes = cpu::kInt4PanelOutputs, groups = cpu::Int8Groups(cols);
  auto q = MakeHugePageArray<uint8_t>(static_cast<size_t>(panels * cpu::Int4PanelBytes(cols)));
  auto scales =
      MakeHugePageArray<cpu::Int8Scale>(static_cast<size_t>(panels * cpu::Int4PanelScales(cols)));
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(cols));
    std::vector<uint8_t> packed(static_cast<size_t>(lanes * cpu::Int4RowBytes(cols)));
    std::vector<cpu::Int8Scale> row_scales(static_cast<size_t>(lanes * groups));
#pragma omp for schedule(static)
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t n = std::min(lanes, rows - p * lanes);
      for (int64_t l = 0; l < n; ++l) {
        w.RowToF32(p * lanes + l, row.data());
        cpu::QuantizeInt4Weights(row.data(), 1, cols, packed.data() + l * cpu::Int4RowBytes(cols),
                                 row_scales.data() + l * groups);
      }
      cpu::PackInt4Panels(packed.data(), row_scales.data(), n, cols,
                          q.get() + p * cpu::Int4PanelBytes(cols),
                          scales.get() + p * cpu::Int4PanelScales(cols));
    }
  }
  return WeightMatrix::FromInt4(std::move(q), std::move(scales), rows, cols, layout);
}

void QuantizeLayer(DecoderLayerWeights* layer, WeightsMode mode) {
  DSCALE_CHECK(IsQuantized(mode));
  ForEachProjection(*layer, [&](WeightMatrix& m) {
    m = mode == WeightsMode::kInt4 ? QuantizeInt4(m) : QuantizeInt8(m);
  });
}

void QuantizeProjections(DecoderWeights* weights, WeightsMode mode) {
  for (DecoderLayerWeights& layer : weights->layers) QuantizeLayer(&layer, mode);
  weights->lm_head = QuantizeInt8(weights->LmHead());
}

}  // namespace dscale
