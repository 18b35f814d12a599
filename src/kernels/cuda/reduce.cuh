#pragma once
// Warp and block reductions shared by the row kernels (device code; .cu files only).
//
// Block reductions need blockDim.x to be a multiple of 32 (at most 1024) and a __shared__
// scratch array of 32 values of the reduced type; every thread of the block gets the result.
// They synchronise the block, so every thread must call them.

#include <cmath>
#include <cstdint>

namespace dscale::cuda {

inline constexpr unsigned kFullWarp = 0xffffffffu;
inline constexpr int kWarpSize = 32;

__device__ inline float WarpSum(float v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(kFullWarp, v, offset);
  }
  return v;
}

// The double form serves reductions that must not lose precision over long rows (the DVL
// softmax statistics and means).
__device__ inline double WarpSum(double v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(kFullWarp, v, offset);
  }
  return v;
}

__device__ inline float WarpMax(float v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v = fmaxf(v, __shfl_xor_sync(kFullWarp, v, offset));
  }
  return v;
}

// Folds one value per warp (lane 0's) through `scratch`, then every warp reduces the partials
// itself. The leading barrier lets callers reuse one scratch array for consecutive reductions.
template <typename T, typename WarpOp>
__device__ T BlockReduce(T v, T identity, T* scratch, WarpOp warp_op) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  v = warp_op(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x) / kWarpSize ? scratch[lane] : identity;
  return warp_op(v);
}

__device__ inline float BlockSum(float v, float* scratch) {
  return BlockReduce(v, 0.0f, scratch, [](float x) { return WarpSum(x); });
}

__device__ inline double BlockSum(double v, double* scratch) {
  return BlockReduce(v, 0.0, scratch, [](double x) { return WarpSum(x); });
}

__device__ inline float BlockMax(float v, float* scratch) {
  return BlockReduce(v, -INFINITY, scratch, [](float x) { return WarpMax(x); });
}

// 1 / sqrt(mean + eps) for a sum of n squares, formed in double like the CPU kernels (once per
// row, so the cost does not matter).
__device__ inline float InverseRms(float sum_squares, int64_t n, float eps) {
  const double mean = static_cast<double>(sum_squares) / static_cast<double>(n);
  return static_cast<float>(1.0 / sqrt(mean + static_cast<double>(eps)));
}

}  // namespace dscale::cuda
