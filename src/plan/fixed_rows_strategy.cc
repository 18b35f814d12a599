#include "plan/fixed_rows_strategy.h"

#include <algorithm>

namespace dscale {

Status FixedRowsStrategy::Decide(const StrategyInput& in, std::span<int32_t> k) {
  const std::span<const StepSpan> spans = in.blocks.spans();
  for (size_t i = 0; i < k.size(); ++i) k[i] = std::min(rows_, spans[i].q_len);
  return Status::Ok();
}

}  // namespace dscale
