#include "plan/predictor_scores.h"

#include <algorithm>

#include "core/check.h"
#include "core/dvl_shapes.h"
#include "dvl/budget_allocator.h"
#include "dvl/features.h"

namespace dscale {

void ZeroPastSpans(const StrategyInput& in, int width, float* q) {
  const std::span<const StepSpan> spans = in.blocks.spans();
  for (int64_t i = 0, d = 0; i < in.requests(); ++i) {
    if (!in.drafted.empty() && !in.drafted[i]) continue;
    float* row = q + d++ * width;
    for (int j = spans[i].q_len; j < width; ++j) row[j] = 0.0f;
  }
}

const float* ScoresForEveryRequest(const StrategyInput& in, int width, const float* drafted_q,
                                   std::vector<float>* all) {
  if (in.drafted_requests == in.requests()) return drafted_q;
  all->assign(static_cast<size_t>(in.requests() * width), 0.0f);
  for (int64_t i = 0, d = 0; i < in.requests(); ++i) {
    float* row = all->data() + i * width;
    if (in.drafted.empty() || in.drafted[i]) {
      std::copy_n(drafted_q + d++ * width, width, row);
    } else {
      row[0] = 1.0f;
    }
  }
  return all->data();
}

void PredictorScores::Compute(const StrategyInput& in) {
  const DraftOutput& drafts = in.drafts;
  const int64_t rows = in.drafted_requests, live_count = in.requests();
  DSCALE_CHECK(drafts.candidates == dvl::kDraftPositions);
  features_.resize(rows * dvl::kFeatureCount);
  logits_.resize(rows * dvl::kDraftPositions);
  q_.resize(rows * dvl::kBlockWidth);
  dvl::ExtractFeaturesBatch(drafts.logits.data(), drafts.hidden.data(), rows, live_count,
                            predictor_->projections(), features_.data());
  predictor_->Forward(features_.data(), rows, logits_.data());
  dvl::PrefixScoresFromLogits(logits_.data(), rows, dvl::kBlockWidth, q_.data());
  ZeroPastSpans(in, dvl::kBlockWidth, q_.data());
}

}  // namespace dscale
