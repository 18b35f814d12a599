#include "plan/plain_strategy.h"

#include <algorithm>

namespace dscale {

Status PlainStrategy::Decide(const StrategyInput&, std::span<int32_t> k) {
  std::fill(k.begin(), k.end(), 1);
  return Status::Ok();
}

}  // namespace dscale
