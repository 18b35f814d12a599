#pragma once
// Predictor quality on logged traces (paper §Predictor quality and budget adjustment).
//
//   R²: accepted-count regression, predicted count ℓ̂ = Σ_{j=1}^{15} q_j with q the prefix
//       scores after the cumulative minimum (the quantity the seed rounds), against y.
//   Retention of a set of windows k: Σ_i min(y_i, k_i − 1) / Σ_i y_i (k includes the anchor).
//       "raw" uses the seeds k⁽⁰⁾, "adjusted" the lengths after budget adjustment.
//   Cohorts: records with the same (step, N) were live together in one collection step. Each
//       cohort of n evaluated records is allocated as one batch with budget
//       BudgetFromFraction(n, W, verify_budget), i.e. 8n slots at the default 0.5.
//   Mean window: mean k over all evaluated records, raw and adjusted.

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "dvl/budget_allocator.h"
#include "dvl/predictor.h"
#include "train/trace_file.h"

namespace dscale::train {

struct EvalReport {
  int64_t records = 0;
  int64_t cohorts = 0;
  double r2 = 0.0;
  double retention_raw = 0.0;       // 1 when no record accepted anything
  double retention_adjusted = 0.0;  // 1 when no record accepted anything
  double mean_window_raw = 0.0;
  double mean_window_adjusted = 0.0;
  double mean_accepted = 0.0;   // mean y
  double mean_predicted = 0.0;  // mean ℓ̂
};

// 1 − SS_res / SS_tot; when every actual value is equal, 1 for a perfect fit and 0 otherwise.
double RSquared(const std::vector<double>& predicted, const std::vector<double>& actual);

// ℓ̂ = Σ_j q_j (after cumulative minimum) for one request's logits [15].
double PredictedAcceptedCount(const float* logits);

// Metrics for precomputed predictor logits [rows.size(), 15] of the records `rows` of `meta`.
Result<EvalReport> EvaluateLogits(const std::vector<float>& logits,
                                  const std::vector<TraceMeta>& meta,
                                  const std::vector<size_t>& rows,
                                  double verify_budget = dvl::kDefaultVerifyBudget);

// Runs the predictor over the records `rows` of `traces` (all records when `rows` is empty)
// and evaluates. InvalidArgument when the predictor's projections (drafter dims or seed) do not
// match the traces' header, since the features would then mean something else.
Result<EvalReport> EvaluatePredictor(const dvl::Predictor& predictor, const TraceSet& traces,
                                     const std::vector<size_t>& rows,
                                     double verify_budget = dvl::kDefaultVerifyBudget);

}  // namespace dscale::train
