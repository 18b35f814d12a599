#pragma once
// DVL predictor features on the device: the contract of dvl::ExtractFeaturesBatch
// (dvl/features.h) for requests whose draft logits and hidden vectors are already on the GPU.
//
//   [   0,  270)  confidence, per draft position: top logit, top − rank r for r = 2..16,
//                 log-softmax of the top token, entropy (nats)
//   [ 270, 1230)  hidden · P_hidden, per position (64 values)
//   [1230, 1710)  (logits − mean(logits)) · P_logit, per position (32 values)
//   [1710, 1735)  [N, 0, 0, 1, 0 × 21], N = step->live_count
//
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
// tests/cuda/dvl_features_test.cc states the bounds.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/dvl_device.h"

namespace dscale::cuda {

// Floats of scratch ExtractFeaturesBatch needs for `requests` requests (centres and the chunk
// partial sums of both projections): 15·requests·(1 + 64·⌈H/512⌉ + 32·⌈V/512⌉).
int64_t FeatureScratchFloats(int64_t requests, int64_t hidden_size, int64_t vocab_size);

// Features of the live requests among `requests` (the launch size, e.g. the bucket N_bs).
//   logits:   [requests, 15, V] f32, the draft logits of the 15 new positions in draft order
//   hidden:   [requests, 15, H] f32, the drafter's final hidden vectors of those positions
//   proj:     device projections with proj.vocab_size = V ≥ 16 and proj.hidden_size = H ≥ 1
//   step:     device DvlStep; only requests i < step->live_count are computed
//   scratch:  FeatureScratchFloats(requests, H, V) floats, overwritten
//   features: [requests, 1735]; rows of requests i ≥ live_count are left untouched
// Logits must be finite (as on the CPU, a −inf logit makes the entropy NaN). Device pointers;
// queued on `stream`, no allocation and no synchronisation, so it can be captured into a graph.
void ExtractFeaturesBatch(const float* logits, const float* hidden, int64_t requests,
                          const DvlProjectionsView& proj, const DvlStep* step, float* scratch,
                          float* features, cudaStream_t stream);

}  // namespace dscale::cuda
