#include "device_dvl/dvl_decision.h"

#include "core/check.h"
#include "core/dvl_shapes.h"
#include "device_dvl/dvl_allocator.h"
#include "device_dvl/dvl_features.h"
#include "device_dvl/dvl_predictor.h"

namespace dscale::cuda {

void EnqueueDvlDecision(const DvlDecisionShape& shape, const DvlDecisionBuffers& buffers,
                        cudaStream_t stream) {
  DSCALE_CHECK(shape.bucket >= 1 && shape.capacity >= shape.bucket);
  DSCALE_CHECK(buffers.projections.hidden_size == shape.hidden_size &&
               buffers.projections.vocab_size == shape.vocab_size);
  constexpr int kWidth = dvl::kBlockWidth;
  ExtractFeaturesBatch(buffers.draft_logits, buffers.draft_hidden, shape.bucket,
                       buffers.projections, buffers.step, buffers.feature_scratch, buffers.features,
                       stream);
  PredictorForward(buffers.features, shape.bucket, buffers.predictor, buffers.step,
                   buffers.pred_logits, stream);
  PrefixScoresFromLogits(buffers.pred_logits, shape.bucket, kWidth, buffers.step, buffers.scores,
                         stream);
  // The allocator writes the lengths straight into the workspace, and the packer reads them
  // from there (as dvl::AllocateAndPack does), adding the sentinels.
  AllocateInto(buffers.scores, shape.bucket, kWidth, buffers.step, buffers.seed, buffers.packed.k,
               buffers.packed.offsets, buffers.updates, stream);
  Pack(buffers.block_tokens, buffers.block_positions, buffers.block_kv_slots, buffers.packed.k,
       shape.bucket, shape.capacity, kWidth, buffers.step, buffers.packed, stream);
}

}  // namespace dscale::cuda
