#include "plan/dspark_strategy.h"

#include "core/check.h"

namespace dscale {

Status DSparkStrategy::Decide(const StrategyInput& in, std::span<int32_t> k) {
  const int64_t n = in.requests();
  DSCALE_CHECK(in.drafted_requests == n);
  scores_.Compute(in.drafts, n, /*live_count=*/n);
  const budget::SpsTable& sps = *sps_;
  budget::DSparkWalk(
      scores_.q(), n, width_, [&sps](int64_t b) { return sps.StepsPerSecond(b); }, &scratch_,
      k.data());
  return Status::Ok();
}

}  // namespace dscale
