#include <algorithm>

#include "core/check.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/cuda_check.h"

namespace dscale::cuda {
namespace {

constexpr int kThreads = 256;
// Grid-stride loops cap the grid here; past it each thread handles several outputs.
constexpr int64_t kMaxBlocks = int64_t{1} << 16;

// silu(g) = g·σ(g) with σ built from e = e^−|g| ∈ (0, 1], as in the CPU kernel: nothing
// overflows for any finite g, and a very negative gate gives −0, silu's limit.
__device__ float Silu(float g) {
  const float e = expf(-fabsf(g));
  const float inv = 1.0f / (1.0f + e);
  return g * (g >= 0.0f ? inv : e * inv);
}

// Grid-stride over the rows·inter outputs, numbered row-major: output k is (k / inter, k % inter).
__global__ void __launch_bounds__(kThreads)
    SwiGluKernel(const float* __restrict__ gate_up, float* __restrict__ out, int64_t total,
                 int64_t inter) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < total;
       k += stride) {
    const int64_t r = k / inter;
    const int64_t i = k - r * inter;
    const float* gate = gate_up + r * 2 * inter;
    out[k] = Silu(gate[i]) * gate[inter + i];
  }
}

}  // namespace

void SwiGlu(const float* gate_up, float* out, int64_t rows, int64_t inter, cudaStream_t stream) {
  DSCALE_CHECK(rows >= 0 && inter >= 0);
  const int64_t total = rows * inter;
  if (total == 0) return;
  const int64_t blocks = std::min((total + kThreads - 1) / kThreads, kMaxBlocks);
  SwiGluKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(gate_up, out, total, inter);
  DSCALE_CUDA_CHECK_LAUNCH();
}

}  // namespace dscale::cuda
