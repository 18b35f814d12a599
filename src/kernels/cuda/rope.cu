#include <limits>

#include "core/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/rope.h"

namespace dscale::cuda {
namespace {

// Threads per block: one per rotation pair i of the row, 64 covering head_dim 128 in one pass.
constexpr int kPairThreads = 64;

// Grid: one block per row. Thread i forms the angle of pair i once — in double, as the CPU
// kernel does: at positions in the tens of thousands a float angle is already off by ~1e-3 rad
// — and rotates that pair in every head of the row:
//   (a, b) → (a·cos − b·sin, b·cos + a·sin)  for (a, b) = (x_i, x_{i+half}).
__global__ void __launch_bounds__(kPairThreads)
    RopeKernel(float* x, const int32_t* positions, int64_t heads, int64_t head_dim,
               int64_t row_stride, RopeSpec rope) {
  const int64_t half = head_dim / 2;
  const double pos = static_cast<double>(positions[blockIdx.x]);
  float* row = x + static_cast<int64_t>(blockIdx.x) * row_stride;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    const double inv_freq = RopeInvFreq(rope, i, head_dim);
    double sin_d = 0.0;
    double cos_d = 0.0;
    sincos(pos * inv_freq, &sin_d, &cos_d);
    const float c = static_cast<float>(cos_d);
    const float s = static_cast<float>(sin_d);
    for (int64_t h = 0; h < heads; ++h) {
      float* lo = row + h * head_dim;
      const float a = lo[i];
      const float b = lo[i + half];
      lo[i] = a * c - b * s;
      lo[i + half] = b * c + a * s;
    }
  }
}

}  // namespace

void ApplyRope(float* x, const int32_t* positions, int64_t rows, int64_t heads, int64_t head_dim,
               int64_t row_stride, const RopeSpec& rope, cudaStream_t stream) {
  DSCALE_CHECK_MSG(head_dim % 2 == 0, "RoPE needs an even head_dim");
  DSCALE_CHECK(rows >= 0 && rows <= std::numeric_limits<int32_t>::max() && heads >= 0);
  if (rows == 0 || heads == 0 || head_dim == 0) return;
  RopeKernel<<<static_cast<unsigned>(rows), kPairThreads, 0, stream>>>(x, positions, heads,
                                                                       head_dim, row_stride, rope);
  DSCALE_CUDA_CHECK_LAUNCH();
}

}  // namespace dscale::cuda
