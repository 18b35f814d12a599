#pragma once
// Fixed shapes of the DVL allocator (paper §DVL Budget Allocation). A draft block has W = 16
// rows: the anchor (the last committed token, always verified) and 15 new draft positions.
// The acceptance predictor sees 1735 features per request and emits one logit per new draft
// position.
//
// These constants live in core, not in dvl, because the device kernels and the device model
// (kernels/cuda, model/cuda: layers below dvl) implement the same decision and need the same
// shapes without depending on the DVL library.

#include <cstdint>

namespace dscale::dvl {

inline constexpr int kBlockWidth = 16;                   // W, including the anchor
inline constexpr int kDraftPositions = kBlockWidth - 1;  // 15 new candidates per block

// Confidence block: per draft position the top logit, its 15 gaps to ranks 2..16, the top
// token's log-probability and the entropy of the softmax.
inline constexpr int kTopRanks = 16;
inline constexpr int kConfidencePerPosition = 1 + (kTopRanks - 1) + 1 + 1;  // 18
inline constexpr int kHiddenProjDim = 64;    // each draft hidden vector → 64 values
inline constexpr int kLogitProjDim = 32;     // each mean-centred logit vector → 32 values
inline constexpr int kBatchContextDim = 25;  // N, 0, 0, initial-state flag 1, zeros

// Offsets of the four feature blocks inside one request's feature vector.
inline constexpr int kConfidenceOffset = 0;
inline constexpr int kHiddenProjOffset = kDraftPositions * kConfidencePerPosition;  // 270
inline constexpr int kLogitProjOffset =
    kHiddenProjOffset + kDraftPositions * kHiddenProjDim;  // 1230
inline constexpr int kBatchContextOffset =
    kLogitProjOffset + kDraftPositions * kLogitProjDim;                       // 1710
inline constexpr int kFeatureCount = kBatchContextOffset + kBatchContextDim;  // 1735

// Entries of the batch-context block (relative to kBatchContextOffset).
inline constexpr int kContextLiveCount = 0;
inline constexpr int kContextInitialState = 3;

// Predictor MLP: kFeatureCount → kPredictorHidden (ReLU) → kDraftPositions logits.
inline constexpr int kPredictorHidden = 64;

static_assert(kConfidencePerPosition == 18);
static_assert(kFeatureCount == 1735);

}  // namespace dscale::dvl
