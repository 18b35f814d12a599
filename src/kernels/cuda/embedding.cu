#include <limits>

#include "core/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/embedding.h"

namespace dscale::cuda {
namespace {

constexpr int kThreads = 256;

// Grid: one block per output row; the threads copy the row's dim values with unit stride, so
// each warp reads and writes 32 consecutive floats.
__global__ void __launch_bounds__(kThreads)
    GatherKernel(const float* __restrict__ table, int64_t vocab, int64_t dim,
                 const int32_t* __restrict__ ids, float* __restrict__ out) {
  const int64_t id = ids[blockIdx.x];
  if (id < 0 || id >= vocab) __trap();  // a programming error: see embedding.h
  const float* src = table + id * dim;
  float* dst = out + static_cast<int64_t>(blockIdx.x) * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = src[i];
}

// GatherKernel for a BF16 table: a BF16 value is the upper half of the f32 with the same value.
__global__ void __launch_bounds__(kThreads)
    GatherBf16Kernel(const Bf16* __restrict__ table, int64_t vocab, int64_t dim,
                     const int32_t* __restrict__ ids, float* __restrict__ out) {
  const int64_t id = ids[blockIdx.x];
  if (id < 0 || id >= vocab) __trap();  // a programming error: see embedding.h
  const Bf16* src = table + id * dim;
  float* dst = out + static_cast<int64_t>(blockIdx.x) * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    dst[i] = __uint_as_float(static_cast<uint32_t>(src[i].bits) << 16);
  }
}

}  // namespace

void EmbeddingGather(const float* table, int64_t vocab, int64_t dim, const int32_t* ids,
                     int64_t rows, float* out, cudaStream_t stream) {
  DSCALE_CHECK(rows >= 0 && rows <= std::numeric_limits<int32_t>::max() && dim >= 0);
  if (rows == 0 || dim == 0) return;
  GatherKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(table, vocab, dim, ids, out);
  DSCALE_CUDA_CHECK_LAUNCH();
}

void EmbeddingGatherBf16(const Bf16* table, int64_t vocab, int64_t dim, const int32_t* ids,
                         int64_t rows, float* out, cudaStream_t stream) {
  DSCALE_CHECK(rows >= 0 && rows <= std::numeric_limits<int32_t>::max() && dim >= 0);
  if (rows == 0 || dim == 0) return;
  GatherBf16Kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(table, vocab, dim, ids,
                                                                         out);
  DSCALE_CUDA_CHECK_LAUNCH();
}

}  // namespace dscale::cuda
