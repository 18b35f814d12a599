#pragma once
// Synthetic predictor traces for tests: the accepted count is a known function of one feature,
// so a working trainer must find it.

#include <algorithm>
#include <cmath>
#include <random>

#include "core/dvl_shapes.h"
#include "train/trace_file.h"

namespace dscale::train::testing {

// The informative feature: the top logit of draft position 1.
inline constexpr int kSignalFeature = 0;
// Features [1, 1 + kNoiseFeatures) are N(0, 1) noise; the rest are constant.
inline constexpr int kNoiseFeatures = 48;

// `records` records of cohorts of 8 (same step, N = 8), 15 consecutive records per prompt.
// y = clamp(round(10 · f), 0, 15) with f ~ U(0, 1) the signal feature, so mean y ≈ 5.
inline TraceSet SyntheticTraces(int records, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  TraceSet set;
  set.header = {.drafter_hidden = 8, .drafter_vocab = 40, .projection_seed = 77};
  set.meta.resize(records);
  set.features.assign(static_cast<size_t>(records) * dvl::kFeatureCount, 0.0f);
  for (int r = 0; r < records; ++r) {
    float* f = set.features.data() + static_cast<size_t>(r) * dvl::kFeatureCount;
    f[kSignalFeature] = unit(rng);
    for (int d = 1; d <= kNoiseFeatures; ++d) f[d] = normal(rng);
    f[dvl::kBatchContextOffset + dvl::kContextLiveCount] = 8.0f;
    f[dvl::kBatchContextOffset + dvl::kContextInitialState] = 1.0f;
    const float y = std::clamp(std::round(10.0f * f[kSignalFeature]), 0.0f, 15.0f);
    set.meta[r] = {.prompt_id = static_cast<uint32_t>(r / 15),
                   .live_count = 8,
                   .step = static_cast<uint32_t>(r / 8),
                   .accepted = static_cast<uint32_t>(y)};
  }
  return set;
}

}  // namespace dscale::train::testing
