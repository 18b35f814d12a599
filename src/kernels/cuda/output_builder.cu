#include <cstdint>

#include "core/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/output_builder.h"

namespace dscale::cuda {
namespace {

constexpr int kThreads = 128;

// Grid: one thread per (request, output column), request-major.
__global__ void __launch_bounds__(kThreads)
    BuildOutputsKernel(const int32_t* __restrict__ tokens, const int32_t* __restrict__ k,
                       const int32_t* __restrict__ offsets, const int32_t* __restrict__ accepted,
                       const int32_t* __restrict__ next_token, int32_t bucket, int32_t width,
                       int32_t* __restrict__ committed, int32_t* __restrict__ out_tokens) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= int64_t{bucket} * width) return;
  const auto i = static_cast<int32_t>(e / width);
  const auto j = static_cast<int32_t>(e - int64_t{i} * width);
  const bool live = k[i] > 0;
  const int32_t a = live ? accepted[i] : -1;
  int32_t token = -1;
  if (j < a) token = tokens[int64_t{offsets[i]} + 1 + j];
  if (j == a) token = next_token[i];
  out_tokens[e] = token;
  if (j == 0) committed[i] = live ? a + 1 : 0;
}

}  // namespace

void BuildVerifyOutputs(const int32_t* tokens, const int32_t* k, const int32_t* offsets,
                        const int32_t* accepted, const int32_t* next_token, int32_t bucket,
                        int32_t width, int32_t* committed, int32_t* out_tokens,
                        cudaStream_t stream) {
  DSCALE_CHECK(bucket >= 0 && width >= 1);
  const int64_t threads = int64_t{bucket} * width;
  if (threads == 0) return;
  const auto blocks = static_cast<unsigned>((threads + kThreads - 1) / kThreads);
  BuildOutputsKernel<<<blocks, kThreads, 0, stream>>>(tokens, k, offsets, accepted, next_token,
                                                      bucket, width, committed, out_tokens);
  DSCALE_CUDA_CHECK_LAUNCH();
}

}  // namespace dscale::cuda
