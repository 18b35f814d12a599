#pragma once
// --spec dscale at a fixed --verify-budget fraction (paper Algorithm 1): predictor scores of
// every request's drafts → seeds → budget adjustment to Σ k_i = M = round(fraction · W · N),
// clamped to [N, W · N] (W · N / 2 by default). Every request is drafted but one with a single
// token left, which keeps its anchor (scored 1, then 0). A block cut short where its request's
// output ends scores 0 past its rows, so M goes to the other requests first; Σ k_i is then
// min(M, the rows the blocks hold) once the planner clamps.

#include <cstdint>
#include <vector>

#include "plan/length_strategy.h"
#include "plan/predictor_scores.h"

namespace dscale {

class DScaleStrategy final : public LengthStrategy {
 public:
  // `predictor` must outlive the strategy; `fraction` in (0, 1].
  DScaleStrategy(const dvl::Predictor& predictor, double fraction)
      : scores_(predictor), fraction_(fraction) {}

  double CapacityFraction(int32_t) const override { return fraction_; }
  Status Decide(const StrategyInput& in, std::span<int32_t> k) override;

 private:
  PredictorScores scores_;
  double fraction_;
  std::vector<int32_t> seed_, offsets_;  // the allocator's by-products [n], [n + 1]
  std::vector<float> all_q_;             // [n, W] where some request has no drafts
};

}  // namespace dscale
