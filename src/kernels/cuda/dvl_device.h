#pragma once
// What the DVL decision kernels (dvl_features.h, dvl_predictor.h, dvl_allocator.h, dvl_pack.h)
// share: the per-step scalars they read from device memory, and device views of the predictor
// file's arrays. Shapes come from core/dvl_shapes.h, shared with the CPU reference in src/dvl, so
// the two cannot drift apart.
//
// Why the live count and the budget live in device memory: a captured graph freezes every
// kernel argument, but one bucket's graph serves every live count N ≤ N_bs. Launch sizes are
// therefore the bucket's (fixed), and each kernel reads N and M_live from a DvlStep that the
// caller rewrites (cudaMemcpyAsync into the same address) before each replay.

#include <cstdint>

#include "core/dvl_shapes.h"

namespace dscale::cuda {

// One step's scalars, in device memory.
struct DvlStep {
  int32_t live_count = 0;  // N: requests 0 .. N−1 are live; 1 ≤ N ≤ the launch's request count
  int32_t budget = 0;      // M_live = Σ k_i; N ≤ M_live ≤ W·N (dvl::BudgetFromFraction)
};

// Device copies of dvl::Projections' matrices.
struct DvlProjectionsView {
  int64_t hidden_size = 0;        // H
  int64_t vocab_size = 0;         // V ≥ 16
  const float* hidden = nullptr;  // [H, 64] row-major
  const float* logit = nullptr;   // [V, 32] row-major
};

// Device copies of dvl::PredictorWeights (same shapes, input-major matrices).
struct DvlPredictorView {
  const float* feature_mean = nullptr;  // [1735]
  const float* feature_std = nullptr;   // [1735], every entry > 0
  const float* w1 = nullptr;            // [1735, 64]
  const float* b1 = nullptr;            // [64]
  const float* w2 = nullptr;            // [64, 15]
  const float* b2 = nullptr;            // [15]
};

}  // namespace dscale::cuda
