#pragma once
// --spec dscale --verify-budget auto: Algorithm 1 over the drafted requests at the M that
// budget::AutoBudget (budget/auto_budget.h) picks per step from the expected-token curve and its
// step-cost model; requests without drafts verify their anchor alone. The AutoBudget also
// decides which new requests get a draft context, how many fed requests draft, and when the
// running ones stop being fed (plain decoding pays better).
//
// Step times come from a budget::StepTimeSource: the clock's in a serving engine, a simulated
// pair's where a test plants them (its choices are then reproducible).

#include <cstdint>
#include <optional>
#include <vector>

#include "budget/auto_budget.h"
#include "budget/step_time_source.h"
#include "dvl/budget_curve.h"
#include "plan/length_strategy.h"
#include "plan/predictor_scores.h"

namespace dscale {

class AutoBudgetStrategy final : public LengthStrategy {
 public:
  // `predictor` and `step_times` must outlive the strategy. `width`: W; `max_requests`: N at
  // most; `experts`: a sparse target's, whose draft rows are then priced by the experts they
  // wake (budget/expert_cost_model.h).
  AutoBudgetStrategy(const dvl::Predictor& predictor, int32_t width, int32_t max_requests,
                     const budget::StepTimeSource& step_times, budget::ExpertShape experts = {},
                     bool held_draft_contexts = false);

  // Any step may verify every row.
  double CapacityFraction(int32_t) const override { return 1.0; }
  Status Decide(const StrategyInput& in, std::span<int32_t> k) override;

  bool FeedNewRequest() override { return auto_.FeedNewRequest(); }
  int32_t DraftCount(int32_t fed, int32_t requests,
                     std::span<const int32_t> prompt_chunks) override {
    return auto_.DraftCount(fed, requests, prompt_chunks);
  }
  void Record(const budget::StepSample& sample, int64_t drafted_committed) override;
  bool DropDraftContexts() override { return auto_.TakeDetach(); }
  bool HoldsDraftContexts() const override { return auto_.mode() == budget::AutoMode::kPlain; }
  std::optional<budget::AutoBudgetSnapshot> AutoSnapshot() const override {
    return auto_.Snapshot();
  }

 private:
  // Seconds this step has spent drafting and deciding so far, as step_times_ sees them.
  double DraftSeconds(const StrategyInput& in) const;

  budget::AutoBudget auto_;
  const budget::StepTimeSource& step_times_;
  PredictorScores scores_;
  dvl::BudgetCurve curve_;
  std::vector<int32_t> drafted_k_, seed_, offsets_;  // the drafted requests' allocation
};

}  // namespace dscale
