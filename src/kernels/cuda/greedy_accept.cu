#include <cstdint>

#include "core/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/greedy_accept.h"

namespace dscale::cuda {
namespace {

constexpr int kThreads = 128;

// Grid: one thread per request.
__global__ void __launch_bounds__(kThreads)
    VerifyGreedyKernel(const int32_t* __restrict__ target_argmax,
                       const int32_t* __restrict__ tokens, const int32_t* __restrict__ k,
                       const int32_t* __restrict__ offsets, int32_t bucket,
                       int32_t* __restrict__ accepted, int32_t* __restrict__ next_token) {
  const int32_t i = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= bucket) return;
  const int32_t rows = k[i];
  if (rows <= 0) {
    accepted[i] = 0;
    next_token[i] = -1;
    return;
  }
  const int64_t first = offsets[i];
  for (int32_t j = 0; j + 1 < rows; ++j) {
    const int32_t target = target_argmax[first + j];
    if (target != tokens[first + j + 1]) {
      accepted[i] = j;
      next_token[i] = target;
      return;
    }
  }
  accepted[i] = rows - 1;
  next_token[i] = target_argmax[first + rows - 1];
}

}  // namespace

void VerifyGreedyPacked(const int32_t* target_argmax, const int32_t* tokens, const int32_t* k,
                        const int32_t* offsets, int32_t bucket, int32_t* accepted,
                        int32_t* next_token, cudaStream_t stream) {
  DSCALE_CHECK(bucket >= 0);
  if (bucket == 0) return;
  const auto blocks =
      static_cast<unsigned>((static_cast<int64_t>(bucket) + kThreads - 1) / kThreads);
  VerifyGreedyKernel<<<blocks, kThreads, 0, stream>>>(target_argmax, tokens, k, offsets, bucket,
                                                      accepted, next_token);
  DSCALE_CUDA_CHECK_LAUNCH();
}

}  // namespace dscale::cuda
