#pragma once
// The predictor's view of a step's drafts, shared by every policy that scores them (dscale,
// auto, dspark): the 1735 features of each drafted request (dvl/features.h) → predictor logits
// [rows, W − 1] → prefix scores q [rows, W] (q_{i,0} = 1, rows nonincreasing; see
// dvl/budget_allocator.h). W is dvl::kBlockWidth. The buffers are reused across steps.
//
// A request whose output ends within its block (Engine::Decide cuts its span at the tokens it
// may still commit) scores 0 past its span: the rows there can add no token, so no policy
// spends its budget on them, and auto's expected-token curve does not count them.

#include <cstdint>
#include <vector>

#include "dvl/predictor.h"
#include "plan/length_strategy.h"

namespace dscale {

// Zeroes q [in.drafted_requests, width] (the drafted requests' prefix scores, in request order)
// past each one's span: q_{i,j} = 0 for j ≥ span i's rows. Rows stay nonincreasing.
void ZeroPastSpans(const StrategyInput& in, int width, float* q);

// Prefix scores for every request of the step, [in.requests(), width], from the drafted ones'
// `drafted_q` [in.drafted_requests, width] (in request order): a request without drafts scores
// its anchor alone (1, then 0), so an allocation over all of them gives it no draft row.
const float* ScoresForEveryRequest(const StrategyInput& in, int width, const float* drafted_q,
                                   std::vector<float>* all);

class PredictorScores {
 public:
  // `predictor` must outlive this object.
  explicit PredictorScores(const dvl::Predictor& predictor) : predictor_(&predictor) {}

  // Scores the step's drafted requests (in.drafted_requests rows, in request order); the
  // features see every request of the step as live. The drafts must hold W − 1 candidates per
  // request.
  void Compute(const StrategyInput& in);

  // The latest Compute's prefix scores [rows, W].
  const float* q() const { return q_.data(); }

 private:
  const dvl::Predictor* predictor_;
  std::vector<float> features_;  // [rows, 1735]
  std::vector<float> logits_;    // [rows, W − 1]
  std::vector<float> q_;
};

}  // namespace dscale
