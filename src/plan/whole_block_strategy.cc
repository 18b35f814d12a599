#include "plan/whole_block_strategy.h"

#include <algorithm>

namespace dscale {

Status WholeBlockStrategy::Decide(const StrategyInput& in, std::span<int32_t> k) {
  const std::span<const StepSpan> spans = in.blocks.spans();
  for (size_t i = 0; i < k.size(); ++i) k[i] = std::min(width_, spans[i].q_len);
  return Status::Ok();
}

}  // namespace dscale
