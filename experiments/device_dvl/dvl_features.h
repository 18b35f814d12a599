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
// Three kernels, nothing atomic: a step's features are the same bits eagerly or replayed from a
// graph. The top logit and its 15 gaps equal the CPU's bits; the rest is within the bounds
// stated in experiments/device_dvl/tests/dvl_features_test.cc (the kernels and the reasons:
// dvl_features.cu).

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
