#include <cstdint>
#include <limits>

#include "core/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dvl_pack.h"

namespace dscale::cuda {
namespace {

constexpr int kThreads = 256;
// The offsets live in shared memory; 8193 · 4 bytes stays under 48 KiB.
constexpr int32_t kMaxBucket = 8192;

// The request that owns packed row s < M_live: the largest i < n with bounds[i] ≤ s. With every
// k_i ≥ 1 the bounds strictly increase, so that is the i with bounds[i] ≤ s < bounds[i + 1].
// Always in [0, n) whatever the bounds hold.
__device__ int32_t OwnerOf(int64_t s, const int32_t* bounds, int32_t n) {
  int32_t lo = 0;
  int32_t hi = n - 1;
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo + 1) / 2;
    if (bounds[mid] <= s) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// One block. `bounds` (dynamic shared memory, [bucket + 1]) holds the live offsets.
__global__ void __launch_bounds__(kThreads)
    PackKernel(const int32_t* __restrict__ tokens, const int32_t* __restrict__ positions,
               const int32_t* __restrict__ kv_slots, const int32_t* k, int32_t bucket,
               int64_t capacity, int width, const DvlStep* __restrict__ step, PackedRows out) {
  extern __shared__ int32_t bounds[];
  int32_t n = step->live_count;
  n = n < 0 ? 0 : (n > bucket ? bucket : n);

  // Every read of k happens before the barrier and every write of out.k after it, so the two
  // may be the same array.
  if (threadIdx.x == 0) {
    bounds[0] = 0;
    for (int32_t i = 0; i < n; ++i) bounds[i + 1] = bounds[i] + k[i];
  }
  __syncthreads();
  const int32_t live_rows = bounds[n];

  for (int32_t i = threadIdx.x; i < bucket; i += blockDim.x) {
    const bool live = i < n;
    out.k[i] = live ? bounds[i + 1] - bounds[i] : 0;  // sentinels: no rows
    out.offsets[i + 1] = live ? bounds[i + 1] : live_rows;
  }
  if (threadIdx.x == 0) out.offsets[0] = 0;

  // Rows: the live requests' prefixes, then tail placeholders reading request 0's anchor slot.
  const int32_t anchor_slot = kv_slots[0];
  for (int64_t s = threadIdx.x; s < capacity; s += blockDim.x) {
    int32_t token = 0;
    int32_t position = 0;
    int32_t slot = anchor_slot;
    if (s < live_rows) {
      const int32_t i = OwnerOf(s, bounds, n);
      const int64_t j = s - bounds[i];
      if (j >= 0 && j < width) {
        const int64_t src = static_cast<int64_t>(i) * width + j;
        token = tokens[src];
        position = positions[src];
        slot = kv_slots[src];
      }
    }
    out.tokens[s] = token;
    out.positions[s] = position;
    out.kv_slots[s] = slot;
  }
}

}  // namespace

void Pack(const int32_t* tokens, const int32_t* positions, const int32_t* kv_slots,
          const int32_t* k, int32_t bucket, int64_t capacity, int width, const DvlStep* step,
          const PackedRows& out, cudaStream_t stream) {
  DSCALE_CHECK(bucket >= 1 && bucket <= kMaxBucket && capacity >= 0 && width >= 1);
  const size_t shared_bytes = (static_cast<size_t>(bucket) + 1) * sizeof(int32_t);
  PackKernel<<<1, kThreads, shared_bytes, stream>>>(tokens, positions, kv_slots, k, bucket,
                                                    capacity, width, step, out);
  DSCALE_CUDA_CHECK_LAUNCH();
}

}  // namespace dscale::cuda
