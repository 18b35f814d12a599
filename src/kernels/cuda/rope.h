#pragma once
// Rotary position embedding, neox "rotate half" layout (Qwen3), on the device. Same contract as
// kernels/cpu/rope.h; x and positions are device pointers, the work is queued on `stream`.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/rope_spec.h"

namespace dscale::cuda {

// In place over x[r, h, :] (row r at x + r·row_stride, heads contiguous, head_dim values each):
// for i < head_dim/2, the pair (x_i, x_{i+head_dim/2}) is rotated by the angle
// positions[r] · RopeInvFreq(rope, i, head_dim). head_dim must be even.
void ApplyRope(float* x, const int32_t* positions, int64_t rows, int64_t heads, int64_t head_dim,
               int64_t row_stride, const RopeSpec& rope, cudaStream_t stream);

}  // namespace dscale::cuda
