#pragma once
// --spec none: plain decoding. Every request verifies its anchor only (k_i = 1), so a bucket
// needs one row per request.

#include "plan/length_strategy.h"

namespace dscale {

class PlainStrategy final : public LengthStrategy {
 public:
  double CapacityFraction(int32_t width) const override { return 1.0 / width; }
  Status Decide(const StrategyInput& in, std::span<int32_t> k) override;
};

}  // namespace dscale
