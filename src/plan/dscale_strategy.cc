#include "plan/dscale_strategy.h"

#include "core/dvl_shapes.h"
#include "dvl/budget_allocator.h"

namespace dscale {

Status DScaleStrategy::Decide(const StrategyInput& in, std::span<int32_t> k) {
  const int64_t n = in.requests();
  // This policy drafts every fed request, and all are fed, but for a request with one token
  // left (nothing to draft for), which keeps its anchor alone.
  scores_.Compute(in);
  const float* q = ScoresForEveryRequest(in, dvl::kBlockWidth, scores_.q(), &all_q_);
  DSCALE_ASSIGN_OR_RETURN(const int64_t budget,
                          dvl::BudgetFromFraction(n, dvl::kBlockWidth, fraction_));
  seed_.resize(n);
  offsets_.resize(n + 1);
  dvl::AllocateInto(q, n, dvl::kBlockWidth, budget, seed_.data(), k.data(), offsets_.data());
  return Status::Ok();
}

}  // namespace dscale
