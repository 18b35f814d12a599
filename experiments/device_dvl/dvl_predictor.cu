#include <limits>

#include "core/check.h"
#include "core/dvl_shapes.h"
#include "device_dvl/dvl_predictor.h"
#include "kernels/cuda/cuda_check.h"

namespace dscale::cuda {
namespace {

using dvl::kDraftPositions;
using dvl::kFeatureCount;
using dvl::kPredictorHidden;

// One thread per hidden unit; the first 15 threads then compute the outputs.
constexpr int kThreads = kPredictorHidden;
static_assert(kThreads % 32 == 0 && kDraftPositions <= kThreads);

// Grid: one block per request.
__global__ void __launch_bounds__(kThreads)
    PredictorKernel(const float* __restrict__ features, DvlPredictorView w,
                    const DvlStep* __restrict__ step, float* __restrict__ logits) {
  __shared__ float normalised[kFeatureCount];
  __shared__ float hidden[kPredictorHidden];
  const int64_t request = blockIdx.x;
  if (request >= step->live_count) return;  // the whole block leaves, before any barrier

  const float* x = features + request * kFeatureCount;
  for (int d = threadIdx.x; d < kFeatureCount; d += blockDim.x) {
    normalised[d] = (x[d] - w.feature_mean[d]) / w.feature_std[d];
  }
  __syncthreads();

  const int h = threadIdx.x;
  float acc = w.b1[h];
  for (int d = 0; d < kFeatureCount; ++d) {
    const float value = normalised[d];
    if (value == 0.0f) continue;
    acc = fmaf(value, w.w1[d * kPredictorHidden + h], acc);
  }
  // std::max(acc, 0.0f): acc unless acc < 0, so NaN stays NaN and −0 stays −0.
  hidden[h] = acc < 0.0f ? 0.0f : acc;
  __syncthreads();

  if (h >= kDraftPositions) return;
  float out = w.b2[h];
  for (int k = 0; k < kPredictorHidden; ++k) {
    out = fmaf(hidden[k], w.w2[k * kDraftPositions + h], out);
  }
  logits[request * kDraftPositions + h] = out;
}

}  // namespace

void PredictorForward(const float* features, int64_t requests, const DvlPredictorView& weights,
                      const DvlStep* step, float* logits, cudaStream_t stream) {
  DSCALE_CHECK(requests >= 0 && requests <= std::numeric_limits<int32_t>::max());
  if (requests == 0) return;
  PredictorKernel<<<static_cast<unsigned>(requests), kThreads, 0, stream>>>(features, weights, step,
                                                                            logits);
  DSCALE_CUDA_CHECK_LAUNCH();
}

}  // namespace dscale::cuda
