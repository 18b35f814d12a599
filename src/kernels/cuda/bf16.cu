#include <algorithm>

#include "core/check.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/cuda_check.h"

namespace dscale::cuda {
namespace {

constexpr int kThreads = 256;
// Enough blocks to fill any current GPU; a grid-stride loop covers the rest.
constexpr int64_t kMaxBlocks = 4096;

// F32ToBf16 (core/dtype.cc) on the device: NaN keeps its sign and gets a quiet bit, everything
// else rounds to nearest even.
__device__ uint16_t RoundToBf16Bits(float value) {
  const uint32_t bits = __float_as_uint(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

__global__ void __launch_bounds__(kThreads)
    ConvertKernel(const float* __restrict__ x, Bf16* __restrict__ out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i].bits = RoundToBf16Bits(x[i]);
  }
}

}  // namespace

void ConvertToBf16(const float* x, Bf16* out, int64_t n, cudaStream_t stream) {
  DSCALE_CHECK(n >= 0);
  if (n == 0) return;
  const int64_t blocks = std::min(kMaxBlocks, (n + kThreads - 1) / kThreads);
  ConvertKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, out, n);
  DSCALE_CUDA_CHECK_LAUNCH();
}

}  // namespace dscale::cuda
