#include "plan/dspark_strategy.h"

#include "core/check.h"

namespace dscale {

const float* DSparkStrategy::Survival(const StrategyInput& in) {
  const DraftOutput& drafts = in.drafts;
  const int64_t n = in.drafted_requests;
  if (scores_.has_value()) {
    scores_->Compute(in);
    return ScoresForEveryRequest(in, width_, scores_->q(), &all_survival_);
  }
  const int positions = width_ - 1;
  DSCALE_CHECK_MSG(drafts.confidence.size() >= static_cast<size_t>(n * positions),
                   "dspark over a confidence head: the drafts carry no confidences");
  survival_.resize(static_cast<size_t>(n * width_));
  budget::SurvivalFromConfidence(drafts.confidence.data(), n, positions, calibration_,
                                 survival_.data());
  ZeroPastSpans(in, width_, survival_.data());
  return ScoresForEveryRequest(in, width_, survival_.data(), &all_survival_);
}

Status DSparkStrategy::Decide(const StrategyInput& in, std::span<int32_t> k) {
  const int64_t n = in.requests();
  const float* q = Survival(in);
  const budget::SpsTable& sps = *sps_;
  budget::DSparkWalk(
      q, n, width_, [&sps](int64_t b) { return sps.StepsPerSecond(b); }, &scratch_, k.data());
  return Status::Ok();
}

}  // namespace dscale
