#pragma once
// RMSNorm over rows, and per-head RMSNorm (Qwen3's q_norm / k_norm).

#include <cstdint>

namespace dscale::cpu {

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]²) + eps) · weight[:]. x and y are [rows, dim]; y may
// alias x.
void RmsNorm(const float* x, const float* weight, float* y, int64_t rows, int64_t dim, float eps);

// In place: each head vector x[r, h, :] (head_dim values) of each row is RMS-normalised with the
// shared weight[head_dim]. Row r starts at x + r·row_stride (the heads may sit inside a wider
// fused QKV row).
void HeadRmsNorm(float* x, const float* weight, int64_t rows, int64_t heads, int64_t head_dim,
                 int64_t row_stride, float eps);

}  // namespace dscale::cpu
