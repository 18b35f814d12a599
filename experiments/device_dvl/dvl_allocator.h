#pragma once
// The DVL budget allocator on the device (paper Algorithm 1, lines 2–9): the contracts of
// dvl::PrefixScoresFromLogits and dvl::AllocateInto (dvl/budget_allocator.h).
//
//   q_{i,0} = 1,  q_{i,j} = min(q_{i,j−1}, σ(logit_{i,j})),  a NaN logit scores 0
//   k_i⁽⁰⁾ = clip(⌊Σ_{j=1}^{W−1} q_{i,j} + ½⌋, 1, W)   (the sum in double, j ascending)
//   while Δ > 0: grow   i* = argmax_{k_i < W} q_{i,k_i}
//   while Δ < 0: shrink i* = argmin_{k_i > 1} q_{i,k_i−1}
// with the lowest request index winning ties in both loops, as on the CPU.
//
// For the same q (no NaN) the seeds, lengths and offsets are dvl::AllocateInto's bits; q itself
// may differ from the CPU's in its last bits (CUDA's expf). How: dvl_allocator.cu.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/dvl_device.h"

namespace dscale::cuda {

// q [requests, width] from predictor logits [requests, width − 1], for the live requests
// (i < step->live_count); other rows are left untouched. width ≥ 2. Device pointers; queued on
// `stream` (graph-capturable).
void PrefixScoresFromLogits(const float* logits, int64_t requests, int width, const DvlStep* step,
                            float* q, cudaStream_t stream);

// Algorithm 1's seeds and budget adjustment for the N = step->live_count live requests, to
// Σ k = step->budget:
//   q:        [requests, width] prefix scores, rows nonincreasing with q[i][0] = 1, no NaN
//   seed:     [requests]; seed[i] = k_i⁽⁰⁾ for i < N
//   k:        [requests]; the adjusted lengths for i < N
//   offsets:  [requests + 1]; offsets[0] = 0, offsets[i + 1] = offsets[i] + k[i] for i < N
//   updates:  one int32, |Δ₀| (the number of grow/shrink steps); may be null
// Entries past N are left untouched (dvl_pack.h writes the sentinels). Requires
// 1 ≤ N ≤ requests and N ≤ budget ≤ width · N; outside that the results are unspecified but
// every access stays in bounds. `requests` ≤ 8192 (the lengths live in shared memory).
// Device pointers; queued on `stream` (graph-capturable).
void AllocateInto(const float* q, int64_t requests, int width, const DvlStep* step, int32_t* seed,
                  int32_t* k, int32_t* offsets, int32_t* updates, cudaStream_t stream);

}  // namespace dscale::cuda
