#include "model/quantize_int8.h"

#include <memory>
#include <utility>
#include <vector>

#include "kernels/cpu/gemm_int8.h"

namespace dscale {

WeightMatrix QuantizeInt8(const WeightMatrix& w) {
  const int64_t rows = w.rows(), cols = w.cols(), groups = cpu::Int8Groups(cols);
  // Not zeroed: the threads' first writes fault the pages in, each its own rows (zeroing them
  // first, on one thread, was 0.5-1 s of a 1.7B model's 4 s load).
  auto q = std::make_unique_for_overwrite<int8_t[]>(static_cast<size_t>(rows * cols));
  auto scales =
      std::make_unique_for_overwrite<cpu::Int8Scale[]>(static_cast<size_t>(rows * groups));
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(cols));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      w.RowToF32(r, row.data());
      cpu::QuantizeInt8Weights(row.data(), 1, cols, q.get() + r * cols, scales.get() + r * groups);
    }
  }
  return WeightMatrix::FromInt8(std::move(q), std::move(scales), rows, cols);
}

void QuantizeLayerInt8(DecoderLayerWeights* layer) {
  layer->qkv = QuantizeInt8(layer->qkv);
  layer->o_proj = QuantizeInt8(layer->o_proj);
  layer->gate_up = QuantizeInt8(layer->gate_up);
  layer->down = QuantizeInt8(layer->down);
}

void QuantizeProjectionsInt8(DecoderWeights* weights) {
  for (DecoderLayerWeights& layer : weights->layers) QuantizeLayerInt8(&layer);
  weights->lm_head = QuantizeInt8(weights->LmHead());
}

}  // namespace dscale
