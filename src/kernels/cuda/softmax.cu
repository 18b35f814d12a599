#include <limits>

#include "core/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/softmax.h"

namespace dscale::cuda {
namespace {

// Both kernels: grid of one block per row, kThreads threads striding over the row's n values.
// At a 152k vocabulary that is ~600 values per thread per pass.
constexpr int kThreads = 512;

// Three passes over the row: the maximum m, then e^(x − m) written back and summed, then the
// scaling by 1/sum. Subtracting m keeps every exponent ≤ 0.
__global__ void __launch_bounds__(kThreads) SoftmaxKernel(float* x, int64_t n) {
  __shared__ float scratch[kWarpSize];
  float* row = x + static_cast<int64_t>(blockIdx.x) * n;
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, row[i]);
  m = BlockMax(m, scratch);
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float e = expf(row[i] - m);
    row[i] = e;
    sum += e;
  }
  const float inv = 1.0f / BlockSum(sum, scratch);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) row[i] *= inv;
}

// A candidate maximum: value and index. `index` is kNone until a value has been taken.
struct Best {
  float value;
  int64_t index;
};
constexpr int64_t kNone = std::numeric_limits<int64_t>::max();

// Whether `b` beats `a`: larger, or equal at a lower index. NaN never beats anything, and −inf
// beats an empty candidate, so a row of −inf yields index 0 as on the CPU.
__device__ bool Beats(const Best& b, const Best& a) {
  return b.value > a.value || (b.value == a.value && b.index < a.index);
}

__device__ Best WarpBest(Best v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const Best other{__shfl_xor_sync(kFullWarp, v.value, offset),
                     __shfl_xor_sync(kFullWarp, v.index, offset)};
    if (Beats(other, v)) v = other;
  }
  return v;
}

// Each thread scans a strided slice (increasing indices, so its first maximum is its lowest),
// then warps and the block keep the winner under Beats, which is associative and commutative:
// the result is the lowest index of the row's maximum whatever the reduction order.
__global__ void __launch_bounds__(kThreads)
    ArgmaxKernel(const float* __restrict__ x, int64_t n, int32_t* __restrict__ out) {
  __shared__ Best scratch[kWarpSize];
  const float* row = x + static_cast<int64_t>(blockIdx.x) * n;
  Best best{-INFINITY, kNone};
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const Best candidate{row[i], i};
    if (Beats(candidate, best)) best = candidate;
  }
  best = WarpBest(best);
  const int lane = threadIdx.x % kWarpSize;
  if (lane == 0) scratch[threadIdx.x / kWarpSize] = best;
  __syncthreads();
  if (threadIdx.x >= kWarpSize) return;
  const int warps = static_cast<int>(blockDim.x) / kWarpSize;
  best = WarpBest(lane < warps ? scratch[lane] : Best{-INFINITY, kNone});
  if (lane == 0) out[blockIdx.x] = static_cast<int32_t>(best.index == kNone ? 0 : best.index);
}

bool FitsGrid(int64_t rows) { return rows >= 0 && rows <= std::numeric_limits<int32_t>::max(); }

}  // namespace

void SoftmaxRows(float* x, int64_t rows, int64_t n, cudaStream_t stream) {
  DSCALE_CHECK(FitsGrid(rows) && n >= 0);
  if (rows == 0 || n == 0) return;
  SoftmaxKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, n);
  DSCALE_CUDA_CHECK_LAUNCH();
}

void ArgmaxRows(const float* x, int64_t rows, int64_t n, int32_t* out, cudaStream_t stream) {
  DSCALE_CHECK(FitsGrid(rows) && n >= 0 && n <= std::numeric_limits<int32_t>::max());
  if (rows == 0) return;
  ArgmaxKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, n, out);
  DSCALE_CUDA_CHECK_LAUNCH();
}

}  // namespace dscale::cuda
