#pragma once
// RMSNorm over rows, and per-head RMSNorm (Qwen3's q_norm / k_norm), on the device. Same
// contracts as kernels/cpu/norm.h; every pointer is a device pointer and the work is queued on
// `stream`.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dscale::cuda {

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]²) + eps) · weight[:]. x and y are [rows, dim]; y may
// alias x.
void RmsNorm(const float* x, const float* weight, float* y, int64_t rows, int64_t dim, float eps,
             cudaStream_t stream);

// In place: each head vector x[r, h, :] (head_dim values) of each row is RMS-normalised with the
// shared weight[head_dim]. Row r starts at x + r·row_stride.
void HeadRmsNorm(float* x, const float* weight, int64_t rows, int64_t heads, int64_t head_dim,
                 int64_t row_stride, float eps, cudaStream_t stream);

}  // namespace dscale::cuda
