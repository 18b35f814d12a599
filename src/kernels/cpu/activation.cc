#include "kernels/cpu/activation.h"

#include <cmath>

#include "kernels/cpu/simd.h"

namespace dscale::cpu {
namespace {

using simd::kLanes;

// out[i] = silu(gate[i]) · up[i] for n values.
void SwiGluRow(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    simd::Store(out + i, simd::Silu(simd::Load(gate + i)) * simd::Load(up + i));
  }
  for (; i < n; ++i) out[i] = Silu(gate[i]) * up[i];
}

constexpr int64_t kParallelMinValues = 1 << 20;

}  // namespace

void SwiGlu(const float* gate_up, float* out, int64_t rows, int64_t inter) {
#pragma omp parallel for schedule(static) if (rows * inter >= kParallelMinValues)
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = gate_up + r * 2 * inter;
    SwiGluRow(gate, gate + inter, out + r * inter, inter);
  }
}

void SiluInPlace(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) simd::Store(x + i, simd::Silu(simd::Load(x + i)));
  for (; i < n; ++i) x[i] = Silu(x[i]);
}

}  // namespace dscale::cpu
