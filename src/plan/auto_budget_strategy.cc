#include "plan/auto_budget_strategy.h"

#include "core/dvl_shapes.h"
#include "dvl/budget_allocator.h"

namespace dscale {

AutoBudgetStrategy::AutoBudgetStrategy(const dvl::Predictor& predictor, int32_t width,
                                       int32_t max_requests,
                                       const budget::StepTimeSource& step_times,
                                       budget::ExpertShape experts, bool held_draft_contexts)
    : auto_(budget::AutoBudgetOptions{.width = width,
                                      .max_requests = max_requests,
                                      .experts = experts,
                                      .held_draft_contexts = held_draft_contexts}),
      step_times_(step_times),
      scores_(predictor) {}

double AutoBudgetStrategy::DraftSeconds(const StrategyInput& in) const {
  const double measured =
      in.draft_s +
      std::chrono::duration<double>(std::chrono::steady_clock::now() - in.started).count();
  return step_times_.DraftSeconds(in.drafted_requests, measured);
}

Status AutoBudgetStrategy::Decide(const StrategyInput& in, std::span<int32_t> k) {
  const int64_t n = in.requests(), rows = in.drafted_requests;
  if (rows == 0) return Status::Ok();  // a plain step: every k_i stays 1
  scores_.Compute(in);
  const double draft_s = DraftSeconds(in);
  dvl::ExpectedTokensCurve(scores_.q(), rows, dvl::kBlockWidth, &curve_, auto_.RowCosts());
  const int64_t m = auto_.ChooseRows(curve_, n - rows, draft_s);
  drafted_k_.resize(rows);
  seed_.resize(rows);
  offsets_.resize(rows + 1);
  dvl::AllocateInto(scores_.q(), rows, dvl::kBlockWidth, m, seed_.data(), drafted_k_.data(),
                    offsets_.data());
  // The drafted requests' lengths, in request order; the others keep their anchor.
  for (int64_t i = 0, d = 0; i < n; ++i) {
    if (in.drafted.empty() || in.drafted[i]) k[i] = drafted_k_[d++];
  }
  return Status::Ok();
}

void AutoBudgetStrategy::Record(const budget::StepSample& sample, int64_t drafted_committed) {
  auto_.Record(step_times_.Times(sample), drafted_committed);
}

}  // namespace dscale
