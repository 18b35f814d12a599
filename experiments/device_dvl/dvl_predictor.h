#pragma once
// The DVL acceptance predictor on the device: the contract of dvl::Predictor::Forward
// (dvl/predictor.h), x̂ = (x − mean) / std, then 1735 → 64 (ReLU) → 15 logits.
//
// One block per request, one thread per hidden unit. The arithmetic follows the CPU's
// PredictorMlpForward operation for operation: the same correctly rounded normalisation, each
// hidden unit accumulated from b1 over d = 0..1734 in order with fused multiply-adds (skipping
// x̂_d = 0, as the CPU does), ReLU with std::max's NaN behaviour, then each output accumulated
// from b2 over the 64 hidden units in order. With the same features the logits therefore agree
// with the CPU's to within float rounding of the two dot products, and are the same bits where
// the CPU compiler also fuses the multiply-adds (GCC does at -march=x86-64-v3).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/dvl_device.h"

namespace dscale::cuda {

// Raw predictor logits for the live requests among `requests`:
//   features: [requests, 1735] f32 (dvl_features.h)
//   weights:  device predictor arrays
//   step:     device DvlStep; only requests i < step->live_count are computed
//   logits:   [requests, 15]; rows of requests i ≥ live_count are left untouched
// Device pointers; queued on `stream`, no allocation or synchronisation (graph-capturable).
void PredictorForward(const float* features, int64_t requests, const DvlPredictorView& weights,
                      const DvlStep* step, float* logits, cudaStream_t stream);

}  // namespace dscale::cuda
