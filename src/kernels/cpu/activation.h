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

// x[i] = silu(x[i]) for i < n, in place.
void SiluInPlace(float* x, int64_t n);

}  // namespace dscale::cpu
