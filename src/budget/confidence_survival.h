#pragma once
// DSpark's survival from its drafter's confidence head (Cheng et al., "DSpark", §3.2.1).
//
// The head gives, per draft position k (0-based here), a logit l_k whose sigmoid estimates that
// draft k survives verification given drafts < k did. Sequential temperature scaling (STS)
// divides each logit by a fitted temperature T_k > 0, and the survival of the first k + 1 drafts
// is the product a_k = Π_{j≤k} σ(l_j / T_j). The walk (budget/dspark_walk.h) reads these as
// prefix scores q [n, W] with q_{r,0} = 1 (the anchor) and q_{r,k+1} = a_{r,k}; rows are
// nonincreasing by construction.
//
// Calibration file (JSON; train/sts_calibration.h fits it, `dscale calibrate-confidence` writes
// it; the default place is the drafter's folder, kConfidenceCalibrationFile):
//   {"format": "dscale-confidence-calibration-v1", "temperatures": [T_0 .. T_{γ−1}],
//    "records": fitted on, "ece_before": ..., "ece_after": ... (held-out, informative)}
// every T positive and finite; γ must equal the drafter's candidates per block.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace dscale::budget {

inline constexpr const char* kConfidenceCalibrationFile = "confidence_calibration.json";

struct ConfidenceCalibration {
  std::vector<float> temperatures;  // [γ]; empty: every T = 1 (uncalibrated)
  // Informative fields of the file (0 when absent): what it was fitted on, and the mean ECE of
  // cumulative survival on held-out traces before and after.
  int64_t records = 0;
  double ece_before = 0;
  double ece_after = 0;

  // T_k, 1 when uncalibrated.
  float Temperature(int k) const {
    return temperatures.empty() ? 1.0f : temperatures[static_cast<size_t>(k)];
  }
};

// q [n, positions + 1] from the raw logits [n, positions]: q_{r,0} = 1, then the running
// product of σ(l / T). `calibration` is empty or has `positions` temperatures (CHECKed).
void SurvivalFromConfidence(const float* logits, int64_t n, int positions,
                            const ConfidenceCalibration& calibration, float* q);

// InvalidArgument naming the file and field unless the file holds `positions` valid
// temperatures.
Result<ConfidenceCalibration> LoadConfidenceCalibration(const std::string& path, int positions);
Status SaveConfidenceCalibration(const ConfidenceCalibration& calibration,
                                 const std::string& path);

}  // namespace dscale::budget
