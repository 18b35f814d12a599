#pragma once
// Elementwise activations on the device (same contract as kernels/cpu/activation.h; device
// pointers, work queued on `stream`).

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dscale::cuda {

// SwiGLU over a fused gate/up projection: out[r, i] = silu(gate_up[r, i]) · gate_up[r, inter + i]
// with gate_up [rows, 2·inter] and out [rows, inter]; silu(x) = x / (1 + e^−x).
void SwiGlu(const float* gate_up, float* out, int64_t rows, int64_t inter, cudaStream_t stream);

}  // namespace dscale::cuda
