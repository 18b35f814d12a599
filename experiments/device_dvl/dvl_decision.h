#pragma once
// One bucket's DVL decision on the device, end to end — what the CPU's VerifyPlanner does for
// --spec dscale (dvl::ExtractFeaturesBatch → Predictor::Forward → dvl::AllocateAndPack):
//
//   features → predictor logits → prefix scores q → seeds and budget adjustment → flat-pack
//
// Every buffer is named by a fixed device address and every per-step value (N, M_live) is read
// from device memory, so the whole sequence can be captured once per bucket into a graph
// (graph.h) and replayed each step after copying the step's inputs into `step`, the draft
// logits and hidden vectors, and the draft blocks.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/dvl_device.h"
#include "kernels/cuda/dvl_pack.h"

namespace dscale::cuda {

// Launch sizes of one bucket.
struct DvlDecisionShape {
  int32_t bucket = 0;       // N_bs, the requests every kernel is launched for
  int64_t capacity = 0;     // M_bs, packed rows (dvl::BucketCapacity)
  int64_t hidden_size = 0;  // H, the drafter's hidden width
  int64_t vocab_size = 0;   // V, the drafter's vocabulary
};

// Device buffers of one bucket. Shapes use N_bs = shape.bucket and W = 16.
struct DvlDecisionBuffers {
  // This step's inputs, rewritten before each step.
  const DvlStep* step = nullptr;             // N ≤ N_bs; M_live ≤ M_bs
  const float* draft_logits = nullptr;       // [N_bs, 15, V]
  const float* draft_hidden = nullptr;       // [N_bs, 15, H]
  const int32_t* block_tokens = nullptr;     // [N_bs, W]: anchor, then the 15 drafts
  const int32_t* block_positions = nullptr;  // [N_bs, W]
  const int32_t* block_kv_slots = nullptr;   // [N_bs, W]
  // The predictor (constant).
  DvlProjectionsView projections;
  DvlPredictorView predictor;
  // Intermediates, readable after the decision (the CPU workspace keeps q and the seeds too).
  float* feature_scratch = nullptr;  // FeatureScratchFloats(N_bs, H, V)
  float* features = nullptr;         // [N_bs, 1735]
  float* pred_logits = nullptr;      // [N_bs, 15]
  float* scores = nullptr;           // [N_bs, W] prefix scores q
  int32_t* seed = nullptr;           // [N_bs] k⁽⁰⁾
  int32_t* updates = nullptr;        // one int32, |Δ₀|; may be null
  // The decision: lengths, offsets and packed rows with sentinels (dvl_pack.h).
  PackedRows packed;
};

// Queues the five stages on `stream`. Rows of requests N ≤ i < N_bs in the intermediates keep
// whatever they held; `packed` is written in full. No allocation, no synchronisation.
void EnqueueDvlDecision(const DvlDecisionShape& shape, const DvlDecisionBuffers& buffers,
                        cudaStream_t stream);

}  // namespace dscale::cuda
