#pragma once
// The predictor's view of a step's drafts, shared by every policy that scores them (dscale,
// auto, dspark): the 1735 features of each drafted request (dvl/features.h) → predictor logits
// [rows, W − 1] → prefix scores q [rows, W] (q_{i,0} = 1, rows nonincreasing; see
// dvl/budget_allocator.h). W is dvl::kBlockWidth. The buffers are reused across steps.

#include <cstdint>
#include <vector>

#include "dvl/predictor.h"
#include "model/drafter.h"

namespace dscale {

class PredictorScores {
 public:
  // `predictor` must outlive this object.
  explicit PredictorScores(const dvl::Predictor& predictor) : predictor_(&predictor) {}

  // Scores the first `rows` requests of `drafts`; the features see `live_count` live requests.
  // The drafts must hold W − 1 candidates per request.
  void Compute(const DraftOutput& drafts, int64_t rows, int64_t live_count);

  // The latest Compute's prefix scores [rows, W].
  const float* q() const { return q_.data(); }

 private:
  const dvl::Predictor* predictor_;
  std::vector<float> features_;  // [rows, 1735]
  std::vector<float> logits_;    // [rows, W − 1]
  std::vector<float> q_;
};

}  // namespace dscale
