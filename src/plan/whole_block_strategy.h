#pragma once
// --spec dflash: the native DFlash baseline. Every request verifies its whole block, k_i = the
// span's rows (W for a drafted request, 1 for one verifying its anchor alone): fixed:W.

#include "plan/fixed_rows_strategy.h"

namespace dscale {

class WholeBlockStrategy final : public FixedRowsStrategy {
 public:
  // `width`: W, the most rows a block holds.
  explicit WholeBlockStrategy(int32_t width) : FixedRowsStrategy(width) {}
};

}  // namespace dscale
