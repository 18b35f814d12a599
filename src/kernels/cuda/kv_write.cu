#include <limits>

#include "core/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kv_write.h"

namespace dscale::cuda {
namespace {

constexpr int kThreads = 256;

// Grid: one block per row; the threads copy the row's kv_dim keys and values with unit stride.
__global__ void __launch_bounds__(kThreads)
    StoreKvKernel(const float* __restrict__ k, const float* __restrict__ v, int64_t row_stride,
                  const int32_t* __restrict__ slots, const int32_t* __restrict__ live_rows,
                  int64_t kv_dim, float* __restrict__ k_cache, float* __restrict__ v_cache) {
  const int64_t row = blockIdx.x;
  if (live_rows != nullptr && row >= *live_rows) return;
  const int64_t src = row * row_stride;
  const int64_t dst = static_cast<int64_t>(slots[row]) * kv_dim;
  for (int64_t i = threadIdx.x; i < kv_dim; i += blockDim.x) {
    k_cache[dst + i] = k[src + i];
    v_cache[dst + i] = v[src + i];
  }
}

}  // namespace

void StoreKvRows(const float* k, const float* v, int64_t row_stride, const int32_t* slots,
                 int64_t rows, const int32_t* live_rows, int64_t kv_dim, float* k_cache,
                 float* v_cache, cudaStream_t stream) {
  DSCALE_CHECK(rows >= 0 && rows <= std::numeric_limits<int32_t>::max());
  DSCALE_CHECK(kv_dim >= 0 && row_stride >= kv_dim);
  if (rows == 0 || kv_dim == 0) return;
  StoreKvKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      k, v, row_stride, slots, live_rows, kv_dim, k_cache, v_cache);
  DSCALE_CUDA_CHECK_LAUNCH();
}

}  // namespace dscale::cuda
