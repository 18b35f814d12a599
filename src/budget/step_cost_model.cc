#include "budget/step_cost_model.h"

namespace dscale::budget {
namespace {

// Weight of the newest fed step in the feed average.
constexpr double kFeedSmoothing = 0.1;

}  // namespace

// Priors: V flat up to 64 rows then proportional (a GPU's memory-bound regime, where the
// paper's W·N/2 is the right budget), 1 ms at one row; D proportional to requests, 1 ms each.
StepCostModel::StepCostModel(int64_t max_rows, int32_t max_requests)
    : verify_({.max_x = max_rows, .prior_knee = 64, .prior_seconds = 1e-3}),
      draft_({.max_x = max_requests, .prior_knee = 1, .prior_seconds = 1e-3}) {}

void StepCostModel::Add(const StepSample& s) {
  if (s.requests < 1 || s.rows < 1) return;
  if (s.VerifyTimed()) verify_.Add(s.rows, s.verify_s);
  if (s.drafted > 0) draft_.Add(s.drafted, s.draft_s);
  if (s.fed_rows > 0) {
    const double per_row = s.feed_s / static_cast<double>(s.fed_rows);
    feed_per_row_ = feed_per_row_ == 0
                        ? per_row
                        : (1 - kFeedSmoothing) * feed_per_row_ + kFeedSmoothing * per_row;
  }
  mean_context_ = static_cast<double>(s.context) / s.requests;
}

}  // namespace dscale::budget
