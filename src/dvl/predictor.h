#pragma once
// The DVL acceptance predictor (paper Eq. predictor): a 1735 → 64 (ReLU) → 15 MLP over
// normalised features, plus the fixed feature projections it was trained with.
//
// Normalisation: before the MLP each feature is standardised with statistics computed on the
// training split, x̂_d = (x_d − mean_d) / std_d. A feature that is constant in training gets
// std_d = 1, so it maps to a constant. The statistics are part of the predictor file.
//
// File format (all little-endian; f32 are IEEE-754 binary32):
//   offset  size  field
#include "core/dvl_shapes.h"
//        0     8  magic "DSCLPRED"
//        8     4  u32 version (kPredictorFileVersion = 1)
//       12     4  u32 feature count (1735)
//       16     4  u32 MLP hidden width (64)
//       20     4  u32 outputs (15)
//       24     4  u32 hidden projection width (64)
//       28     4  u32 logit projection width (32)
//       32     4  u32 drafter hidden size H
//       36     4  u32 drafter vocabulary size V
//       40     8  u64 projection seed
//       48        f32 payload, in this order:
//                 hidden projection [H, 64], logit projection [V, 32],
//                 feature mean [1735], feature std [1735],
//                 w1 [1735, 64], b1 [64], w2 [64, 15], b2 [15]
// The file size must equal 48 + 4 · (payload floats) exactly. Matrices are input-major
// ([in, out] row-major), so forward is out = x · w + b.

#include <cstdint>
#include <string>
#include <vector>

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
