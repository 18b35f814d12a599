#include "plan/predictor_scores.h"

#include "core/check.h"
#include "core/dvl_shapes.h"
#include "dvl/budget_allocator.h"
#include "dvl/features.h"

namespace dscale {

void PredictorScores::Compute(const DraftOutput& drafts, int64_t rows, int64_t live_count) {
  DSCALE_CHECK(drafts.candidates == dvl::kDraftPositions);
  features_.resize(rows * dvl::kFeatureCount);
  logits_.resize(rows * dvl::kDraftPositions);
  q_.resize(rows * dvl::kBlockWidth);
  dvl::ExtractFeaturesBatch(drafts.logits.data(), drafts.hidden.data(), rows, live_count,
                            predictor_->projections(), features_.data());
  predictor_->Forward(features_.data(), rows, logits_.data());
  dvl::PrefixScoresFromLogits(logits_.data(), rows, dvl::kBlockWidth, q_.data());
}

}  // namespace dscale
