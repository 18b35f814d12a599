#pragma once
// The DVL acceptance predictor (paper Eq. predictor): a 1735 → 64 (ReLU) → 15 MLP over features
// standardised with the training split's statistics (x̂_d = (x_d − mean_d) / std_d), plus the
// fixed feature projections it was trained with. Its file layout: docs/TRACE_FORMAT.md
// ("Predictor files").

#include <cstdint>
#include <string>
#include <vector>

#include "core/dvl_shapes.h"
#include "core/status.h"
#include "dvl/features.h"

namespace dscale::dvl {

inline constexpr uint32_t kPredictorFileVersion = 1;
inline constexpr char kPredictorMagic[8] = {'D', 'S', 'C', 'L', 'P', 'R', 'E', 'D'};
inline constexpr int64_t kPredictorHeaderBytes = 48;

struct PredictorWeights {
  std::vector<float> feature_mean;  // [1735]
  std::vector<float> feature_std;   // [1735], every entry finite and > 0
  std::vector<float> w1;            // [1735, 64]
  std::vector<float> b1;            // [64]
  std::vector<float> w2;            // [64, 15]
  std::vector<float> b2;            // [15]

  // All-zero weights with mean 0 and std 1 (the shape every file holds).
  static PredictorWeights Zeros();
};

// What the running drafter expects; Load rejects a file built for another drafter.
struct DrafterDims {
  int64_t hidden_size = 0;  // 0: accept any
  int64_t vocab_size = 0;   // 0: accept any
};

class Predictor {
 public:
  Predictor() = default;
  Predictor(Projections projections, PredictorWeights weights);

  // Reads and validates `path`: magic, version, dims (against `expected` where non-zero),
  // exact size, finite values, positive std. Errors name the file and the problem.
  static Result<Predictor> Load(const std::string& path, DrafterDims expected = {});
  Status Save(const std::string& path) const;

  // Raw logits for n requests: features [n, 1735] → logits [n, 15]. Thread-compatible (const).
  void Forward(const float* features, int64_t n, float* logits) const;

  const Projections& projections() const { return projections_; }
  const PredictorWeights& weights() const { return weights_; }

  // Folds the logit projection through the running drafter's LM head (dvl/features.h,
  // FoldLogitProjection): the features' logit block from the hidden vectors from now on.
  void FoldLogitProjection(const HeadRows& head_rows) {
    dvl::FoldLogitProjection(projections_, head_rows);
  }

 private:
  Projections projections_;
  PredictorWeights weights_;
};

// MLP forward for one normalised feature vector: x̂ [1735] → logits [15]. Shared with the
// trainer so training and serving run the same arithmetic. `hidden` receives the post-ReLU
// activations [64].
void PredictorMlpForward(const PredictorWeights& w, const float* normalised, float* hidden,
                         float* logits);

}  // namespace dscale::dvl
