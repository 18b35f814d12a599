#pragma once
// --spec dspark: DSpark's scheduler (budget/dspark_walk.h). Every request's drafts are ranked by
// their survival and the walk takes them while the steps-per-second table says throughput still
// grows. Every request is drafted but one with a single token left (its anchor alone). Survival
// comes from one of two places, chosen when the engine is made (MakeLengthStrategy):
//   - the drafter's confidence head (DSpark's drafter): a_k = Π_{j≤k} σ(l_j / T_j) with the STS
//     temperatures of its calibration (budget/confidence_survival.h) — DSpark as published;
//   - DScale's predictor (any drafter of block 16): its prefix scores, "DSpark's scheduler on the
//     DFlash drafter".

#include <optional>
#include <utility>
#include <vector>

#include "budget/confidence_survival.h"
#include "budget/dspark_walk.h"
#include "budget/sps_table.h"
#include "plan/length_strategy.h"
#include "plan/predictor_scores.h"

namespace dscale {

class DSparkStrategy final : public LengthStrategy {
 public:
  // Survival from the predictor. `predictor` and `sps` must outlive the strategy; `width`: W.
  DSparkStrategy(const dvl::Predictor& predictor, const budget::SpsTable& sps, int32_t width)
      : scores_(predictor), sps_(&sps), width_(width) {}
  // Survival from the drafts' confidence logits under `calibration` (empty: uncalibrated).
  DSparkStrategy(budget::ConfidenceCalibration calibration, const budget::SpsTable& sps,
                 int32_t width)
      : calibration_(std::move(calibration)), sps_(&sps), width_(width) {}

  // The walk may take every row.
  double CapacityFraction(int32_t) const override { return 1.0; }
  Status Decide(const StrategyInput& in, std::span<int32_t> k) override;

 private:
  // The prefix survival q [n, W] of this step's requests (0 past a span cut short; a request
  // without drafts, which has one token left, survives at its anchor only).
  const float* Survival(const StrategyInput& in);

  std::optional<PredictorScores> scores_;  // set: rank by the predictor
  budget::ConfidenceCalibration calibration_;
  std::vector<float> survival_;      // [drafted, W] from the confidence head
  std::vector<float> all_survival_;  // [n, W] where some request has no drafts
  const budget::SpsTable* sps_;
  int32_t width_;
  budget::DSparkScratch scratch_;
};

}  // namespace dscale
