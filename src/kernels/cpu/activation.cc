#include "kernels/cpu/activation.h"

#include <cmath>

#include "kernels/cpu/simd.h"

namespace dscale::cpu {
namespace {

using simd::Floats;
using simd::kLanes;

// silu(g) = g·σ(g), with σ built from e = e^−|g| ∈ (0, 1]: σ(g) = 1/(1 + e) for g ≥ 0 and
// e/(1 + e) otherwise. Nothing overflows for any finite g, and σ of a very negative gate
// underflows to 0 (silu → −0, its limit).
Floats Silu(Floats g) {
  const Floats e = simd::ExpNonPositive(g < 0.0f ? g : -g);
  const Floats inv = 1.0f / (1.0f + e);
  return g * (g >= 0.0f ? inv : e * inv);
}

float Silu(float g) {
  const float e = std::exp(-std::fabs(g));
  const float inv = 1.0f / (1.0f + e);
  return g * (g >= 0.0f ? inv : e * inv);
}

// out[i] = silu(gate[i]) · up[i] for n values.
void SwiGluRow(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    simd::Store(out + i, Silu(simd::Load(gate + i)) * simd::Load(up + i));
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
  for (; i + kLanes <= n; i += kLanes) simd::Store(x + i, Silu(simd::Load(x + i)));
  for (; i < n; ++i) x[i] = Silu(x[i]);
}

}  // namespace dscale::cpu
