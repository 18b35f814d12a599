// AllocateInto runs in one thread block (the paper's choice: no host round trip and no
// inter-block synchronisation). The block is a single warp: each grow or shrink is a warp-wide
// arg-max/arg-min over the requests, lane l scanning requests l, l + 32, ... and the lanes
// combining with shuffles, so an update costs no block barrier. Every comparison and the
// double-precision seed sums are the CPU's, so for the same q (no NaN) the seeds, lengths and
// offsets are the same bits as dvl::AllocateInto's.
//
// PrefixScoresFromLogits evaluates σ with CUDA's expf (within 2 ulp; glibc's within 1), so q
// from the same logits can differ from the CPU's in the last bits; allocations then agree unless
// a comparison or a seed's rounding is decided by that noise.

#include <cstdint>

#include "core/check.h"
#include "device_dvl/dvl_allocator.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/reduce.cuh"

namespace dscale::cuda {
namespace {

constexpr int kScoreThreads = 128;
// The allocator's lengths live in shared memory: 8192 · 4 bytes stays under the 48 KiB every
// device grants without opting in.
constexpr int64_t kMaxAllocatorRequests = 8192;

// N clamped to [0, requests], so a bad step never indexes past the arrays.
__device__ int32_t LiveCount(const DvlStep* step, int64_t requests) {
  const int32_t n = step->live_count;
  if (n < 0) return 0;
  return n > requests ? static_cast<int32_t>(requests) : n;
}

// The CPU's Sigmoid: NaN scores 0, else 1 / (1 + e^(−x)) in float.
__device__ float Sigmoid(float x) {
  if (isnan(x)) return 0.0f;
  return 1.0f / (1.0f + expf(-x));
}

// Grid: one thread per request. Row i: q[0] = 1, q[j] = std::min(q[j − 1], σ(logit[j − 1])).
__global__ void __launch_bounds__(kScoreThreads)
    PrefixScoresKernel(const float* __restrict__ logits, int64_t requests, int width,
                       const DvlStep* __restrict__ step, float* __restrict__ q) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= LiveCount(step, requests)) return;
  const float* in = logits + i * (width - 1);
  float* row = q + i * width;
  float previous = 1.0f;
  row[0] = previous;
  for (int j = 1; j < width; ++j) {
    const float p = Sigmoid(in[j - 1]);
    previous = p < previous ? p : previous;  // std::min(previous, p)
    row[j] = previous;
  }
}

// The CPU's SeedLength: Σ_{j ≥ 1} q[j] in double in order, ⌊· + ½⌋, std::clamp to [1, width].
__device__ int32_t SeedLength(const float* q, int width) {
  double expected = 0.0;
  for (int j = 1; j < width; ++j) expected += q[j];
  const double rounded = floor(expected + 0.5);
  const double upper = static_cast<double>(width);
  const double clamped = rounded < 1.0 ? 1.0 : (upper < rounded ? upper : rounded);
  return static_cast<int32_t>(clamped);
}

// A candidate request for one grow (largest score wins) or shrink (smallest wins); request −1
// means none.
struct Choice {
  float score;
  int32_t request;
};

// Whether `a` is chosen over `b`: a real candidate over none, then the better score, then on
// equal scores the lower request index. For scores without NaN this is a strict total order on
// distinct requests, so the warp reduction below picks exactly what the CPU's ascending scan
// with a strict comparison picks: the lowest index among the best scores.
template <bool kLargest>
__device__ bool Prefer(const Choice& a, const Choice& b) {
  if (a.request < 0) return false;
  if (b.request < 0) return true;
  if (kLargest ? a.score > b.score : a.score < b.score) return true;
  return a.score == b.score && a.request < b.request;
}

// The request to grow (next-slot gain q[i][k_i], k_i < width) or shrink (last-slot loss
// q[i][k_i − 1], k_i > 1); −1 when none qualifies. Called by the whole warp; every lane gets
// the answer.
template <bool kGrow>
__device__ int32_t ChooseRequest(const float* q, int32_t n, int width, const int32_t* lengths) {
  Choice best{0.0f, -1};
  for (int32_t i = threadIdx.x; i < n; i += kWarpSize) {
    const int32_t k = lengths[i];
    if (kGrow ? k >= width : k <= 1) continue;
    const Choice candidate{q[static_cast<int64_t>(i) * width + (kGrow ? k : k - 1)], i};
    if (Prefer<kGrow>(candidate, best)) best = candidate;
  }
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const Choice other{__shfl_xor_sync(kFullWarp, best.score, offset),
                       __shfl_xor_sync(kFullWarp, best.request, offset)};
    if (Prefer<kGrow>(other, best)) best = other;
  }
  return best.request;
}

// Moves Δ towards 0 by one length step at a time (+1 growing, −1 shrinking) until it reaches 0
// or no request qualifies. Lane 0 writes each step; the barriers order that write after every
// lane's reads and before the next choice.
template <bool kGrow>
__device__ void Adjust(const float* q, int32_t n, int width, int64_t steps, int32_t* lengths) {
  for (int64_t done = 0; done < steps; ++done) {
    const int32_t chosen = ChooseRequest<kGrow>(q, n, width, lengths);
    if (chosen < 0) return;  // only when the budget is outside [N, W·N]
    __syncwarp();
    if (threadIdx.x == 0) lengths[chosen] += kGrow ? 1 : -1;
    __syncwarp();
  }
}

// One block of one warp. `lengths` (dynamic shared memory, [requests]) holds k while it moves.
__global__ void __launch_bounds__(kWarpSize)
    AllocateKernel(const float* __restrict__ q, int64_t requests, int width,
                   const DvlStep* __restrict__ step, int32_t* __restrict__ seed,
                   int32_t* __restrict__ k, int32_t* __restrict__ offsets,
                   int32_t* __restrict__ updates) {
  extern __shared__ int32_t lengths[];
  const int lane = threadIdx.x;
  const int32_t n = LiveCount(step, requests);

  long long seed_total = 0;
  for (int32_t i = lane; i < n; i += kWarpSize) {
    const int32_t s = SeedLength(q + static_cast<int64_t>(i) * width, width);
    seed[i] = s;
    lengths[i] = s;
    seed_total += s;
  }
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    seed_total += __shfl_xor_sync(kFullWarp, seed_total, offset);
  }
  __syncwarp();

  const int64_t delta = static_cast<int64_t>(step->budget) - seed_total;
  if (delta > 0) Adjust<true>(q, n, width, delta, lengths);
  if (delta < 0) Adjust<false>(q, n, width, -delta, lengths);

  for (int32_t i = lane; i < n; i += kWarpSize) k[i] = lengths[i];
  if (lane != 0) return;
  int32_t offset = 0;
  offsets[0] = 0;
  for (int32_t i = 0; i < n; ++i) {
    offset += lengths[i];
    offsets[i + 1] = offset;
  }
  if (updates != nullptr) *updates = static_cast<int32_t>(delta < 0 ? -delta : delta);
}

}  // namespace

void PrefixScoresFromLogits(const float* logits, int64_t requests, int width, const DvlStep* step,
                            float* q, cudaStream_t stream) {
  DSCALE_CHECK(requests >= 0 && requests <= kMaxAllocatorRequests && width >= 2);
  if (requests == 0) return;
  const auto blocks = static_cast<unsigned>((requests + kScoreThreads - 1) / kScoreThreads);
  PrefixScoresKernel<<<blocks, kScoreThreads, 0, stream>>>(logits, requests, width, step, q);
  DSCALE_CUDA_CHECK_LAUNCH();
}

void AllocateInto(const float* q, int64_t requests, int width, const DvlStep* step, int32_t* seed,
                  int32_t* k, int32_t* offsets, int32_t* updates, cudaStream_t stream) {
  DSCALE_CHECK(requests >= 0 && requests <= kMaxAllocatorRequests && width >= 2);
  if (requests == 0) return;
  const size_t shared_bytes = static_cast<size_t>(requests) * sizeof(int32_t);
  AllocateKernel<<<1, kWarpSize, shared_bytes, stream>>>(q, requests, width, step, seed, k, offsets,
                                                         updates);
  DSCALE_CUDA_CHECK_LAUNCH();
}

}  // namespace dscale::cuda
