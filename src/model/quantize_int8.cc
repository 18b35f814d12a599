#include "model/quantize_int8.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "kernels/cpu/gemm_int8.h"

namespace dscale {
namespace {

// The largest magnitude a quantised weight takes: the range is symmetric, so −128 is unused.
constexpr float kInt8Max = 127.0f;

// One group of n ≤ 32 weights: its scale, and its values rounded onto that grid.
void QuantizeGroup(const float* w, int64_t n, int8_t* q, cpu::Int8Scale* scale) {
  float largest = 0.0f;
  for (int64_t i = 0; i < n; ++i) largest = std::max(largest, std::fabs(w[i]));
  *scale = cpu::Int8ScaleAtLeast(largest / kInt8Max);
  const float s = cpu::Int8ScaleValue(*scale);
  for (int64_t i = 0; i < n; ++i) {
    // s is 0 only for an all-zero group (or one whose largest weight is below 127 times the
    // smallest subnormal): every value rounds to 0 there. The clamp catches w / s reaching
    // 127.5 through the rounding of s.
    // nearbyint (ties to even) compiles to one instruction; std::round is a library call.
    const float v = s == 0.0f ? 0.0f : std::nearbyint(w[i] / s);
    q[i] = static_cast<int8_t>(std::clamp(v, -kInt8Max, kInt8Max));
  }
}

}  // namespace

void QuantizeInt8Rows(const float* w, int64_t rows, int64_t cols, int8_t* q,
                      cpu::Int8Scale* scales) {
  const int64_t groups = cpu::Int8Groups(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t begin = r * cols + g * cpu::kInt8GroupSize;
      const int64_t n = std::min(cpu::kInt8GroupSize, cols - g * cpu::kInt8GroupSize);
      QuantizeGroup(w + begin, n, q + begin, scales + r * groups + g);
    }
  }
}

WeightMatrix QuantizeInt8(const WeightMatrix& w) {
  const int64_t rows = w.rows(), cols = w.cols(), groups = cpu::Int8Groups(cols);
  std::vector<int8_t> q(static_cast<size_t>(rows * cols));
  std::vector<cpu::Int8Scale> scales(static_cast<size_t>(rows * groups));
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(cols));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      w.RowToF32(r, row.data());
      QuantizeInt8Rows(row.data(), 1, cols, q.data() + r * cols, scales.data() + r * groups);
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
