// Work is queued as three kernels:
//   1. one block per (request, position) row: each thread keeps the 16 largest values of its
//      strided slice, the block merges those into the row's 16 largest, then sums e^(x − max)
//      and e^(x − max)·(x − max) in double (the softmax statistics) and the row in double (its
//      mean, the logit projection's centre);
//   2. the two projections over 512-row chunks of P: each thread owns one (position, column)
//      output, subtracts the centre from each value first (so no large uncentred sum cancels
//      later) and accumulates its chunk in float, in row order, with fused multiply-adds;
//   3. the chunk sums added in double, in chunk order, and rounded once to float.
// Nothing is atomic, so a step's features are the same bits whether run eagerly or replayed
// from a graph.
//
// Agreement with the CPU: the top logit and the 15 gaps are the same bits (the 16 largest
// values are selected exactly and each gap is one subtraction). The log-probability and entropy
// differ by the two sides' exponentials (CUDA's expf, within 2 ulp; the CPU's vectorised one)
// and the CPU's float-lane partial sums: a few parts in 10⁶ of (1 + |value|). Each projection
// is within γ_514·Σ_r|(x_r − mean)·p_r| of the exact centred product; the CPU's (one uncentred
// BLAS product, then − mean·(1ᵀP)) carries the rounding of a length-V float product instead.
// experiments/device_dvl/tests/dvl_features_test.cc states the bounds.

#include <cstdint>
#include <limits>

#include "core/check.h"
#include "core/dvl_shapes.h"
#include "device_dvl/dvl_features.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/reduce.cuh"

namespace dscale::cuda {
namespace {

using dvl::kBatchContextDim;
using dvl::kBatchContextOffset;
using dvl::kConfidenceOffset;
using dvl::kConfidencePerPosition;
using dvl::kContextInitialState;
using dvl::kContextLiveCount;
using dvl::kDraftPositions;
using dvl::kFeatureCount;
using dvl::kHiddenProjDim;
using dvl::kHiddenProjOffset;
using dvl::kLogitProjDim;
using dvl::kLogitProjOffset;
using dvl::kTopRanks;

// Threads of the per-row confidence kernel; each keeps the top 16 of its strided slice, so the
// block merges kRowThreads · 16 candidates.
constexpr int kRowThreads = 256;
constexpr int kCandidates = kRowThreads * kTopRanks;
// Rows of a projection matrix per float partial sum: every float accumulation has at most 512
// terms whatever the vocabulary, and the chunks give the grid its second dimension.
constexpr int64_t kChunkRows = 512;
// gridDim.y, which carries the chunk index, is limited to 65535.
constexpr int64_t kMaxChunks = 65535;

constexpr int64_t Chunks(int64_t rows) { return (rows + kChunkRows - 1) / kChunkRows; }
constexpr int ProjectionOutputs(int columns) { return kDraftPositions * columns; }

// Inserts v into top[0, 16), kept in descending order, when v is larger than the last entry
// (which drops out): walking down from the end, entries smaller than v move one slot down and v
// lands in the slot of the first entry smaller than it (slot p reads slot p − 1 before that is
// rewritten). Every index is a compile-time constant after unrolling, so `top` stays in
// registers. NaN is never inserted (the contract excludes it), and −inf only fills slots that
// already hold −inf.
__device__ void InsertDescending(float (&top)[kTopRanks], float v) {
  if (!(v > top[kTopRanks - 1])) return;
#pragma unroll
  for (int p = kTopRanks - 1; p > 0; --p) {
    top[p] = top[p - 1] < v ? top[p - 1] : (top[p] < v ? v : top[p]);
  }
  top[0] = top[0] < v ? v : top[0];
}

// A merge candidate: its value and its slot in the block's candidate array. Candidates are
// ranked by value descending, then slot ascending, which is a strict total order on distinct
// slots, so repeated values are still picked one at a time.
struct Ranked {
  float value;
  int32_t slot;
};
constexpr int32_t kNoSlot = std::numeric_limits<int32_t>::max();

__device__ bool RanksBefore(const Ranked& a, const Ranked& b) {
  return a.value > b.value || (a.value == b.value && a.slot < b.slot);
}

__device__ Ranked WarpFirst(Ranked v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const Ranked other{__shfl_xor_sync(kFullWarp, v.value, offset),
                       __shfl_xor_sync(kFullWarp, v.slot, offset)};
    if (RanksBefore(other, v)) v = other;
  }
  return v;
}

// The first-ranked of the block's values `v`; every thread gets it. Synchronises the block.
__device__ Ranked BlockFirst(Ranked v, Ranked* scratch) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  v = WarpFirst(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x) / kWarpSize;
  return WarpFirst(lane < warps ? scratch[lane] : Ranked{-INFINITY, kNoSlot});
}

// The 16 largest candidates' values, descending, into ranks[0, 16) (written by thread 0). Round
// r takes the first candidate ranked after round r − 1's pick. These are the row's 16 largest
// values with their multiplicities: order the row by value, ties by index; each of its first 16
// elements has at most 15 elements before it, so at most 15 in its thread's slice, and that
// thread kept it (or, on a tie at its 16th slot, an equal value).
__device__ void SelectTopRanks(const float* candidates, Ranked* scratch, float* ranks) {
  Ranked previous{INFINITY, -1};
  for (int r = 0; r < kTopRanks; ++r) {
    Ranked best{-INFINITY, kNoSlot};
    for (int c = threadIdx.x; c < kCandidates; c += blockDim.x) {
      const Ranked candidate{candidates[c], c};
      if (RanksBefore(previous, candidate) && RanksBefore(candidate, best)) best = candidate;
    }
    best = BlockFirst(best, scratch);
    if (threadIdx.x == 0) ranks[r] = best.value;
    previous = best;
  }
}

// [N, 0, 0, 1, 0 × 21] for one request, written by the block's first kBatchContextDim threads.
__device__ void WriteBatchContext(int32_t live_count, float* context) {
  const int t = threadIdx.x;
  if (t >= kBatchContextDim) return;
  float value = 0.0f;
  if (t == kContextLiveCount) value = static_cast<float>(live_count);
  if (t == kContextInitialState) value = 1.0f;
  context[t] = value;
}

// Grid: one block per (request, position) row, rows numbered request · 15 + position. Writes
// the row's 18 confidence values and its mean (as float, the projection centre); the position-0
// block of each request also writes the batch context.
__global__ void __launch_bounds__(kRowThreads)
    ConfidenceKernel(const float* __restrict__ logits, int64_t vocab,
                     const DvlStep* __restrict__ step, float* __restrict__ features,
                     float* __restrict__ centres) {
  __shared__ float candidates[kCandidates];
  __shared__ float ranks[kTopRanks];
  __shared__ Ranked rank_scratch[kWarpSize];
  __shared__ double sum_scratch[kWarpSize];

  const int64_t row_index = blockIdx.x;
  const int64_t request = row_index / kDraftPositions;
  const int position = static_cast<int>(row_index % kDraftPositions);
  const int32_t live_count = step->live_count;
  if (request >= live_count) return;  // the whole block leaves, before any barrier
  const float* row = logits + row_index * vocab;

  // Pass 1: each thread's top 16, and the row sum for the mean.
  float top[kTopRanks];
#pragma unroll
  for (int p = 0; p < kTopRanks; ++p) top[p] = -INFINITY;
  double sum = 0.0;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    const float x = row[v];
    sum += x;
    InsertDescending(top, x);
  }
#pragma unroll
  for (int p = 0; p < kTopRanks; ++p) candidates[p * kRowThreads + threadIdx.x] = top[p];
  __syncthreads();
  SelectTopRanks(candidates, rank_scratch, ranks);
  __syncthreads();  // publishes ranks[]
  const double mean = BlockSum(sum, sum_scratch) / static_cast<double>(vocab);

  // Pass 2: softmax statistics relative to the maximum, the CPU's formulas: z = Σ e^(x−max)
  // and s = Σ e^(x−max)·(x−max), here summed in double over float exponentials; log p_top =
  // −log z and entropy = log z − s / z.
  const float max_logit = ranks[0];
  double z = 0.0;
  double s = 0.0;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    const float shifted = row[v] - max_logit;
    const float e = expf(shifted);
    z += e;
    s += static_cast<double>(e) * shifted;
  }
  z = BlockSum(z, sum_scratch);
  s = BlockSum(s, sum_scratch);

  if (threadIdx.x == 0) {
    float* out =
        features + request * kFeatureCount + kConfidenceOffset + position * kConfidencePerPosition;
    out[0] = max_logit;
    for (int r = 1; r < kTopRanks; ++r) out[r] = max_logit - ranks[r];
    const double log_z = log(z);
    out[kTopRanks] = static_cast<float>(-log_z);
    out[kTopRanks + 1] = static_cast<float>(log_z - s / z);
    centres[row_index] = static_cast<float>(mean);
  }
  if (position == 0) {
    WriteBatchContext(live_count, features + request * kFeatureCount + kBatchContextOffset);
  }
}

// Threads of the projection kernels: one per (position, column) output of a request.
template <int kCols>
constexpr int kProjectionThreads = ProjectionOutputs(kCols);

// Grid (request, chunk); thread = position · kCols + column. For row = request · 15 + position
// writes partials[request][chunk][position][column] = Σ_{r in chunk} (x[row][r] − centre[row]) ·
// p[r][column], accumulated in float in row order with fused multiply-adds. Null `centres`
// means no centring (the hidden projection).
template <int kCols>
__global__ void __launch_bounds__(kProjectionThreads<kCols>)
    ProjectChunkKernel(const float* __restrict__ x, int64_t inner,
                       const float* __restrict__ centres, const float* __restrict__ p,
                       const DvlStep* __restrict__ step, float* __restrict__ partials) {
  const int64_t request = blockIdx.x;
  if (request >= step->live_count) return;
  const int64_t chunk = blockIdx.y;
  const int position = static_cast<int>(threadIdx.x) / kCols;
  const int column = static_cast<int>(threadIdx.x) % kCols;
  const int64_t row = request * kDraftPositions + position;
  const float* xr = x + row * inner;
  const float centre = centres != nullptr ? centres[row] : 0.0f;
  const int64_t begin = chunk * kChunkRows;
  const int64_t end = begin + kChunkRows < inner ? begin + kChunkRows : inner;
  float acc = 0.0f;
  for (int64_t r = begin; r < end; ++r) acc = fmaf(xr[r] - centre, p[r * kCols + column], acc);
  partials[(request * gridDim.y + chunk) * kProjectionThreads<kCols> + threadIdx.x] = acc;
}

// Grid: one block per request, one thread per (position, column) output. Adds the request's
// chunk partials in double in chunk order and rounds once to float into
// features[request][offset + position · kCols + column].
template <int kCols>
__global__ void __launch_bounds__(kProjectionThreads<kCols>)
    SumChunksKernel(const float* __restrict__ partials, int64_t chunks,
                    const DvlStep* __restrict__ step, int feature_offset,
                    float* __restrict__ features) {
  const int64_t request = blockIdx.x;
  if (request >= step->live_count) return;
  const float* mine = partials + request * chunks * kProjectionThreads<kCols> + threadIdx.x;
  double total = 0.0;
  for (int64_t c = 0; c < chunks; ++c) total += mine[c * kProjectionThreads<kCols>];
  features[request * kFeatureCount + feature_offset + threadIdx.x] = static_cast<float>(total);
}

// Queues one projection: chunk partials into `partials`, then their sums into the features.
template <int kCols>
void Project(const float* x, int64_t requests, int64_t inner, const float* centres, const float* p,
             const DvlStep* step, float* partials, int feature_offset, float* features,
             cudaStream_t stream) {
  constexpr unsigned kThreads = kProjectionThreads<kCols>;
  const int64_t chunks = Chunks(inner);
  const dim3 grid(static_cast<unsigned>(requests), static_cast<unsigned>(chunks));
  ProjectChunkKernel<kCols><<<grid, kThreads, 0, stream>>>(x, inner, centres, p, step, partials);
  DSCALE_CUDA_CHECK_LAUNCH();
  SumChunksKernel<kCols><<<static_cast<unsigned>(requests), kThreads, 0, stream>>>(
      partials, chunks, step, feature_offset, features);
  DSCALE_CUDA_CHECK_LAUNCH();
}

}  // namespace

int64_t FeatureScratchFloats(int64_t requests, int64_t hidden_size, int64_t vocab_size) {
  return requests * kDraftPositions *
         (1 + kHiddenProjDim * Chunks(hidden_size) + kLogitProjDim * Chunks(vocab_size));
}

void ExtractFeaturesBatch(const float* logits, const float* hidden, int64_t requests,
                          const DvlProjectionsView& proj, const DvlStep* step, float* scratch,
                          float* features, cudaStream_t stream) {
  const int64_t vocab = proj.vocab_size;
  const int64_t hidden_size = proj.hidden_size;
  DSCALE_CHECK(vocab >= kTopRanks && hidden_size >= 1 && requests >= 0);
  DSCALE_CHECK(requests * kDraftPositions <= std::numeric_limits<int32_t>::max());
  DSCALE_CHECK(Chunks(vocab) <= kMaxChunks && Chunks(hidden_size) <= kMaxChunks);
  if (requests == 0) return;
  float* centres = scratch;
  float* hidden_partials = centres + requests * kDraftPositions;
  float* logit_partials =
      hidden_partials + requests * kDraftPositions * kHiddenProjDim * Chunks(hidden_size);

  ConfidenceKernel<<<static_cast<unsigned>(requests * kDraftPositions), kRowThreads, 0, stream>>>(
      logits, vocab, step, features, centres);
  DSCALE_CUDA_CHECK_LAUNCH();
  Project<kHiddenProjDim>(hidden, requests, hidden_size, /*centres=*/nullptr, proj.hidden, step,
                          hidden_partials, kHiddenProjOffset, features, stream);
  Project<kLogitProjDim>(logits, requests, vocab, centres, proj.logit, step, logit_partials,
                         kLogitProjOffset, features, stream);
}

}  // namespace dscale::cuda
