#include "model/quantize_weights.h"

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
  auto [q, scales] =
      QuantizeRows<uint8_t>(w, cpu::Int4RowBytes(w.cols()),
                            [](const float* row, int64_t cols, uint8_t* dst, cpu::Int8Scale* s) {
                              cpu::QuantizeInt4Weights(row, 1, cols, dst, s);
                            });
  return WeightMatrix::FromInt4(std::move(q), std::move(scales), w.rows(), w.cols());
}

void QuantizeLayer(DecoderLayerWeights* layer, WeightsMode mode) {
  DSCALE_CHECK(IsQuantized(mode));
  const auto quantize = mode == WeightsMode::kInt4 ? QuantizeInt4 : QuantizeInt8;
  ForEachProjection(*layer, [&](WeightMatrix& m) { m = quantize(m); });
}

void QuantizeProjections(DecoderWeights* weights, WeightsMode mode) {
  for (DecoderLayerWeights& layer : weights->layers) QuantizeLayer(&layer, mode);
  weights->lm_head = QuantizeInt8(weights->LmHead());
}

}  // namespace dscale
