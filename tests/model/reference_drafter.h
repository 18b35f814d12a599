#pragma once
// A plain DFlash draft for one request, in float64 from the target's reference features on:
// the specification DFlashDrafter::Draft is checked against, for the original layers and the
// newer drafters' causal and sliding-window layers and scaled embeddings alike.

#include <cstdint>
#include <vector>

#include "io/decoder_config.h"
#include "io/dflash_config.h"
#include "model/decoder_weights.h"
#include "model/dflash_drafter.h"

namespace dscale::testing {

// The draft logits [block − 1, vocab] of a request whose committed context is `context`
// (positions 0 .. n − 1, its features from ReferenceForward of the target) and whose block is
// [anchor, mask × (block − 1)] at positions n .. n + block − 1. Every draft layer attends as
// config.LayerAttention says: a block query at position p sees the context and block keys at
// positions j with j ≤ p where causal, |p − j| < window (p − j < window where causal) under a
// window; the block's embeddings are multiplied by config.input_embedding_scale.
std::vector<double> ReferenceDraftLogits(const DFlashConfig& config, const DFlashWeights& weights,
                                         const DecoderConfig& target_config,
                                         const DecoderWeights& target_weights,
                                         const std::vector<int32_t>& context, int32_t anchor);

}  // namespace dscale::testing
