#pragma once
// --spec dspark: DSpark's scheduler on DScale's predictor (budget/dspark_walk.h). The prefix
// scores of every request's drafts rank the candidate rows, and the walk takes them while the
// steps-per-second table says throughput still grows. Every request must be drafted.

#include "budget/dspark_walk.h"
#include "budget/sps_table.h"
#include "plan/length_strategy.h"
#include "plan/predictor_scores.h"

namespace dscale {

class DSparkStrategy final : public LengthStrategy {
 public:
  // `predictor` and `sps` must outlive the strategy; `width`: W.
  DSparkStrategy(const dvl::Predictor& predictor, const budget::SpsTable& sps, int32_t width)
      : scores_(predictor), sps_(&sps), width_(width) {}

  // The walk may take every row.
  double CapacityFraction(int32_t) const override { return 1.0; }
  Status Decide(const StrategyInput& in, std::span<int32_t> k) override;

 private:
  PredictorScores scores_;
  const budget::SpsTable* sps_;
  int32_t width_;
  budget::DSparkScratch scratch_;
};

}  // namespace dscale
