#pragma once
// The DVL predictor of a source drafter, rewritten for the inflated pair: the same MLP over
// features equal to the source pair's up to float rounding (docs/INFLATE.md, "The predictor").

#include "core/status.h"
#include "dvl/predictor.h"
#include "inflate/inflate_plan.h"

namespace dscale {

// `small` must be built for the source drafter (hidden d, vocabulary V). The hidden projection's
// rows follow the plan's hidden map (scaled by λ when the drafter's hidden rows come out as y/λ);
// the logit projection's real rows are centred per column, put on a grid where their column sums
// are exactly zero, and its pad rows are zero, so the huge pad logits drop out of the centred
// projection exactly.
Result<dvl::Predictor> InflatePredictor(const dvl::Predictor& small, const InflatePlan& plan);

// The same for a drafter that drafts over a reduced vocabulary: `small` is built for the source
// subset's `small_vocab` columns, the result for the inflated subset's `large_vocab`, whose first
// small_vocab columns are the source subset's tokens and the rest pad rows (InflateDraftVocab).
Result<dvl::Predictor> InflatePredictor(const dvl::Predictor& small, const InflatePlan& plan,
                                        int64_t small_vocab, int64_t large_vocab);

}  // namespace dscale
