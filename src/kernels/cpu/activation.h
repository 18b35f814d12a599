#pragma once
// Elementwise activations.

#include <cmath>
#include <cstdint>

namespace dscale::cpu {

// SwiGLU over a fused gate/up projection: out[r, i] = silu(gate_up[r, i]) · gate_up[r, inter + i]
// with gate_up [rows, 2·inter] and out [rows, inter]; silu(x) = x / (1 + e^−x).
void SwiGlu(const float* gate_up, float* out, int64_t rows, int64_t inter);

// 1 / (1 + e^−x): the gates' (attention output, Gated DeltaNet's β, a shared expert's).
inline float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// silu(x) = x·σ(x), σ from e = e^−|x| as simd::Silu has it (the vector loops' scalar tails).
inline float Silu(float x) {
  const float e = std::exp(-std::fabs(x));
  const float inv = 1.0f / (1.0f + e);
  return x * (x >= 0.0f ? inv : e * inv);
}

// x[i] = silu(x[i]) for i < n, in place.
void SiluInPlace(float* x, int64_t n);

}  // namespace dscale::cpu
