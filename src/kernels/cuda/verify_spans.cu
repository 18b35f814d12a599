#include <cstdint>

#include "core/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/verify_spans.h"

namespace dscale::cuda {
namespace {

constexpr int kThreads = 128;

// Grid: one thread per request.
__global__ void __launch_bounds__(kThreads)
    BuildSpansKernel(const int32_t* __restrict__ k, const int32_t* __restrict__ offsets,
                     const int32_t* __restrict__ ctx_len, const int32_t* page_tables,
                     int32_t pages_per_request, int32_t bucket, StepSpan* spans) {
  const int32_t i = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= bucket) return;
  StepSpan span;
  span.q_start = offsets[i];
  span.q_len = k[i];
  span.ctx_len = ctx_len[i];
  span.page_table = page_tables + static_cast<int64_t>(i) * pages_per_request;
  spans[i] = span;
}

}  // namespace

void BuildVerifySpans(const int32_t* k, const int32_t* offsets, const int32_t* ctx_len,
                      const int32_t* page_tables, int32_t pages_per_request, int32_t bucket,
                      StepSpan* spans, cudaStream_t stream) {
  DSCALE_CHECK(bucket >= 0 && pages_per_request >= 1);
  if (bucket == 0) return;
  const auto blocks = static_cast<unsigned>((int64_t{bucket} + kThreads - 1) / kThreads);
  BuildSpansKernel<<<blocks, kThreads, 0, stream>>>(k, offsets, ctx_len, page_tables,
                                                    pages_per_request, bucket, spans);
  DSCALE_CUDA_CHECK_LAUNCH();
}

}  // namespace dscale::cuda
