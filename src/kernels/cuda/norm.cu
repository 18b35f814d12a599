#include <limits>

#include "core/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/reduce.cuh"

namespace dscale::cuda {
namespace {

constexpr int kRowThreads = 256;
constexpr int kHeadWarps = 4;  // head vectors per block of HeadRmsNormKernel
constexpr int kHeadThreads = kHeadWarps * kWarpSize;

// y[i] = x[i] · inv_rms · weight[i] for the n values of one vector, strided over `count`
// threads starting at `first`; y may alias x (each thread rewrites only what it read).
__device__ void ScaleByWeight(const float* x, const float* weight, float inv_rms, float* y,
                              int64_t n, int first, int count) {
  for (int64_t i = first; i < n; i += count) y[i] = x[i] * inv_rms * weight[i];
}

// Grid: one block of kRowThreads per row. Each thread sums the squares of a strided slice of the
// row, the block adds the partial sums, then each thread scales its slice.
__global__ void __launch_bounds__(kRowThreads)
    RmsNormKernel(const float* x, const float* weight, float* y, int64_t dim, float eps) {
  __shared__ float scratch[kWarpSize];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * dim;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum += xr[i] * xr[i];
  sum = BlockSum(sum, scratch);
  ScaleByWeight(xr, weight, InverseRms(sum, dim, eps), yr, dim, threadIdx.x, blockDim.x);
}

// Grid: one warp per head vector, kHeadWarps vectors per block, vectors numbered row-major over
// (row, head). A warp whose vector lies past the end leaves as a whole, so the shuffles in
// WarpSum always see all 32 lanes.
__global__ void __launch_bounds__(kHeadThreads)
    HeadRmsNormKernel(float* x, const float* weight, int64_t vectors, int64_t heads,
                      int64_t head_dim, int64_t row_stride, float eps) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t vec = static_cast<int64_t>(blockIdx.x) * kHeadWarps + threadIdx.x / kWarpSize;
  if (vec >= vectors) return;
  float* xh = x + (vec / heads) * row_stride + (vec % heads) * head_dim;
  float sum = 0.0f;
  for (int64_t i = lane; i < head_dim; i += kWarpSize) sum += xh[i] * xh[i];
  sum = WarpSum(sum);
  ScaleByWeight(xh, weight, InverseRms(sum, head_dim, eps), xh, head_dim, lane, kWarpSize);
}

bool FitsGrid(int64_t blocks) {
  return blocks >= 0 && blocks <= std::numeric_limits<int32_t>::max();
}

}  // namespace

void RmsNorm(const float* x, const float* weight, float* y, int64_t rows, int64_t dim, float eps,
             cudaStream_t stream) {
  DSCALE_CHECK(FitsGrid(rows) && dim >= 0);
  if (rows == 0 || dim == 0) return;
  RmsNormKernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(x, weight, y, dim, eps);
  DSCALE_CUDA_CHECK_LAUNCH();
}

void HeadRmsNorm(float* x, const float* weight, int64_t rows, int64_t heads, int64_t head_dim,
                 int64_t row_stride, float eps, cudaStream_t stream) {
  DSCALE_CHECK(rows >= 0 && heads >= 0 && head_dim >= 0);
  DSCALE_CHECK(row_stride >= heads * head_dim);
  const int64_t vectors = rows * heads;
  if (vectors == 0 || head_dim == 0) return;
  const int64_t blocks = (vectors + kHeadWarps - 1) / kHeadWarps;
  DSCALE_CHECK(FitsGrid(blocks));
  HeadRmsNormKernel<<<static_cast<unsigned>(blocks), kHeadThreads, 0, stream>>>(
      x, weight, vectors, heads, head_dim, row_stride, eps);
  DSCALE_CUDA_CHECK_LAUNCH();
}

}  // namespace dscale::cuda
