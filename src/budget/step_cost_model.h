#pragma once
// The decode step's cost, learned online from the engine's own timings. A step is split into
// what the verified row count drives and what speculation adds on top of plain decoding:
//
//   step seconds ≈ V(rows)                     verify forward + acceptance + commit
//                + D(drafted requests)         drafting + the decision stage (drafted steps)
//                + feed · rows fed             committed rows appended to the draft context
//
// V and D are robust cost curves (cost_curve.h): V over Σ k_i, D over the requests drafted;
// feed is an average seconds per row. Requests and context enter as follows: D is keyed by
// requests; V by rows only, its bins keeping the latest eight steps each, so as contexts grow
// over a run (attention work per row) the bins follow within eight visits. No start-up
// profiling: a cold model answers from the curves' priors.

#include <cstdint>

#include "budget/cost_curve.h"
#include "core/expert_occupancy.h"

namespace dscale::budget {

// One decode step as the engine measured it.
struct StepSample {
  int32_t requests = 0;  // N verified
  int32_t drafted = 0;   // of which drafted this step (0: a plain step)
  int64_t rows = 0;      // Σ k_i verified
  int64_t context = 0;   // Σ positions already cached over the N requests
  int64_t fed_rows = 0;  // rows appended to the draft context
  double draft_s = 0;    // drafting + decision stage
  double feed_s = 0;     // appending fed_rows to the draft context
  double verify_s = 0;   // verify forward + acceptance + commit, less feed_s
  // Prompt rows that ran in the verify's pass (mixed prefill): verify_s then holds their time
  // too, so the step says nothing of what the verify alone costs (VerifyTimed).
  int64_t prompt_rows = 0;
  // A mixture of experts: the distinct experts per sparse layer the verify woke, and the experts
  // the first rows of this step's spans (its prefill chunks and verified blocks) woke.
  double experts = 0;
  ExpertOccupancy occupancy;

  bool VerifyTimed() const { return prompt_rows == 0; }
};

class StepCostModel {
 public:
  // Rows and requests beyond these are clamped (the bins' range).
  StepCostModel(int64_t max_rows, int32_t max_requests);

  // Learns the verify from a step that timed it alone (StepSample::VerifyTimed); drafting and
  // feeding from every step.
  void Add(const StepSample& s);

  double VerifySeconds(double rows) const { return verify_.Predict(rows); }
  double DraftSeconds(double drafted) const { return draft_.Predict(drafted); }
  double FeedSecondsPerRow() const { return feed_per_row_; }
  const CostCurve& verify() const { return verify_; }
  const CostCurve& draft() const { return draft_; }
  // Σ positions / N of the latest step (reports only).
  double mean_context() const { return mean_context_; }

 private:
  CostCurve verify_;
  CostCurve draft_;
  double feed_per_row_ = 0;
  double mean_context_ = 0;
};

}  // namespace dscale::budget
