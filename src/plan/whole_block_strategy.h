#pragma once
// --spec dflash: the native DFlash baseline. Every request verifies its whole block, k_i = the
// span's rows (W for a drafted request, 1 for one verifying its anchor alone).

#include "plan/length_strategy.h"

namespace dscale {

class WholeBlockStrategy final : public LengthStrategy {
 public:
  // `width`: W, the most rows a block holds.
  explicit WholeBlockStrategy(int32_t width) : width_(width) {}

  double CapacityFraction(int32_t) const override { return 1.0; }
  Status Decide(const StrategyInput& in, std::span<int32_t> k) override;

 private:
  int32_t width_;
};

}  // namespace dscale
