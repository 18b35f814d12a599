#pragma once
// --spec fixed:K: uniform truncation. Every request verifies the first K rows of its block
// (fewer when the span is shorter: a request without drafts has its anchor row only).

#include <algorithm>

#include "plan/length_strategy.h"

namespace dscale {

class FixedRowsStrategy : public LengthStrategy {
 public:
  // `rows`: K. A K above W asks for a capacity over W · N_bs, which the bucket config refuses.
  explicit FixedRowsStrategy(int32_t rows) : rows_(rows) {}

  double CapacityFraction(int32_t width) const override {
    return static_cast<double>(rows_) / width;
  }
  Status Decide(const StrategyInput& in, std::span<int32_t> k) override;
  // K rows verify the anchor and K − 1 candidates, whatever the drafts say.
  int32_t CandidatesRead(int32_t candidates) const override {
    return std::min(rows_ - 1, candidates);
  }

 private:
  int32_t rows_;
};

}  // namespace dscale
