#pragma once
// Rotary position embedding, neox "rotate half" layout (Qwen3).

#include <cstdint>

#include "core/rope_spec.h"

namespace dscale::cpu {

// In place over x[r, h, :] (row r at x + r·row_stride, heads contiguous, head_dim values each):
// with d = rope.rotary_dim (head_dim when 0), for i < d/2 the pair (x_i, x_{i+d/2}) is rotated
// by the angle positions[r] · RopeInvFreq(rope, i, d); dims d .. head_dim − 1 are left as they
// are. head_dim and d must be even.
void ApplyRope(float* x, const int32_t* positions, int64_t rows, int64_t heads, int64_t head_dim,
               int64_t row_stride, const RopeSpec& rope);

}  // namespace dscale::cpu
