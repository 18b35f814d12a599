#include "plan/dscale_strategy.h"

#include <string>

#include "core/dvl_shapes.h"
#include "dvl/budget_allocator.h"

namespace dscale {
namespace {

// Algorithm 1 adjusts over whole blocks: a shorter one has no rows to grow into.
Status CheckWholeBlocks(const StepBatch& blocks) {
  for (const StepSpan& block : blocks.spans()) {
    if (block.q_len != dvl::kBlockWidth) {
      return InvalidArgument("every block must hold W = " + std::to_string(dvl::kBlockWidth) +
                             " rows, got " + std::to_string(block.q_len));
    }
  }
  return Status::Ok();
}

}  // namespace

Status DScaleStrategy::Decide(const StrategyInput& in, std::span<int32_t> k) {
  const int64_t n = in.requests();
  // Every request is scored: this policy drafts every fed request, and all are fed.
  scores_.Compute(in.drafts, n, /*live_count=*/n);
  DSCALE_ASSIGN_OR_RETURN(const int64_t budget,
                          dvl::BudgetFromFraction(n, dvl::kBlockWidth, fraction_));
  DSCALE_RETURN_IF_ERROR(CheckWholeBlocks(in.blocks));
  seed_.resize(n);
  offsets_.resize(n + 1);
  dvl::AllocateInto(scores_.q(), n, dvl::kBlockWidth, budget, seed_.data(), k.data(),
                    offsets_.data());
  return Status::Ok();
}

}  // namespace dscale
