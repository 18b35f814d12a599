#include <algorithm>

#include "core/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/random_fill.h"

namespace dscale::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // grid-stride loops cover larger fills

// SplitMix64's output function: a bijective mix with good avalanche, enough for weights.
__device__ uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) from the top 24 bits of the hash of (seed, i): exact in a float.
__device__ float Uniform01(uint64_t seed, int64_t i) {
  const uint64_t h = Mix64(seed + 0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(i) + 1));
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

__device__ int64_t FirstIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ int64_t GridStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

__global__ void __launch_bounds__(kThreads)
    UniformBf16Kernel(Bf16* out, int64_t n, uint64_t seed, float low, float width) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const float value = low + width * Uniform01(seed, i);
    // Round to nearest even (finite values only here).
    const uint32_t bits = __float_as_uint(value);
    out[i].bits = static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
  }
}

__global__ void __launch_bounds__(kThreads)
    UniformKernel(float* out, int64_t n, uint64_t seed, float low, float width) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride())
    out[i] = low + width * Uniform01(seed, i);
}

__global__ void __launch_bounds__(kThreads) ConstantKernel(float* out, int64_t n, float value) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) out[i] = value;
}

unsigned Blocks(int64_t n) {
  return static_cast<unsigned>(std::min(kMaxBlocks, (n + kThreads - 1) / kThreads));
}

}  // namespace

void FillUniformBf16(Bf16* out, int64_t n, uint64_t seed, float low, float high,
                     cudaStream_t stream) {
  DSCALE_CHECK(n >= 0 && low <= high);
  if (n == 0) return;
  UniformBf16Kernel<<<Blocks(n), kThreads, 0, stream>>>(out, n, seed, low, high - low);
  DSCALE_CUDA_CHECK_LAUNCH();
}

void FillUniform(float* out, int64_t n, uint64_t seed, float low, float high, cudaStream_t stream) {
  DSCALE_CHECK(n >= 0 && low <= high);
  if (n == 0) return;
  UniformKernel<<<Blocks(n), kThreads, 0, stream>>>(out, n, seed, low, high - low);
  DSCALE_CUDA_CHECK_LAUNCH();
}

void FillConstant(float* out, int64_t n, float value, cudaStream_t stream) {
  DSCALE_CHECK(n >= 0);
  if (n == 0) return;
  ConstantKernel<<<Blocks(n), kThreads, 0, stream>>>(out, n, value);
  DSCALE_CUDA_CHECK_LAUNCH();
}

}  // namespace dscale::cuda
