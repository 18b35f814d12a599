#pragma once
// A drafter's reduced vocabulary (model/draft_vocab.h) carried to the inflated pair. The
// inflated vocabulary keeps the source's tokens at their ids and adds pad rows that never win
// (docs/INFLATE.md), so the source subset's ids draft exactly as before. To make the LM head's
// cost that of a subset of the real shape, the inflated subset also takes pad ids in the
// source's proportion: a subset of S of V tokens becomes round(S · V' / V) of V', the S source
// ids followed by the first pad ids. The pad rows never win, so drafts, accepted lengths and the
// subset's DVL features (with the predictor's pad columns zero) are those of the source pair.

#include <cstdint>

#include "inflate/inflate_plan.h"
#include "model/draft_vocab.h"

namespace dscale {

// The inflated subset of `small` (made for plan.small_target) for plan.large_target.
DraftVocab InflateDraftVocab(const DraftVocab& small, const InflatePlan& plan);

}  // namespace dscale
