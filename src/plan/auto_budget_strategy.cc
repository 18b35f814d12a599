#include "plan/auto_budget_strategy.h"

#include "core/dvl_shapes.h"
#include "dvl/budget_allocator.h"

namespace dscale {

AutoBudgetStrategy::AutoBudgetStrategy(const dvl::Predictor& predictor, int32_t width,
                                       int32_t max_requests, const budget::SimulatedPair* planted)
    : auto_(budget::AutoBudgetOptions{.width = width, .max_requests = max_requests}),
      planted_(planted),
      scores_(predictor) {}

double AutoBudgetStrategy::DraftSeconds(const StrategyInput& in) const {
  if (planted_ != nullptr) return planted_->draft_seconds(in.drafted_requests);
  return in.draft_s +
         std::chrono::duration<double>(std::chrono::steady_clock::now() - in.started).count();
}

Status AutoBudgetStrategy::Decide(const StrategyInput& in, std::span<int32_t> k) {
  const int64_t n = in.requests(), rows = in.drafted_requests;
  if (rows == 0) return Status::Ok();  // a plain step: every k_i stays 1
  scores_.Compute(in.drafts, rows, /*live_count=*/n);
  const double draft_s = DraftSeconds(in);
  dvl::ExpectedTokensCurve(scores_.q(), rows, dvl::kBlockWidth, &curve_);
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
  budget::StepSample s = sample;
  if (const budget::SimulatedPair* p = planted_) {
    s.draft_s = s.drafted > 0 ? p->draft_seconds(s.drafted) : 0.0;
    s.feed_s = p->feed_seconds_per_row * double(s.fed_rows);
    s.verify_s = p->verify_seconds(s.rows);
  }
  auto_.Record(s, drafted_committed);
}

}  // namespace dscale
