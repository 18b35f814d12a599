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

}  // namespace dscale
