#pragma once
// Sequential temperature scaling (STS) of a confidence head (Cheng et al., "DSpark", §3.2.1),
// and the calibration error it minimises.
//
// ECE. For position k, each record's predicted survival a_k = Π_{j≤k} σ(l_j / T_j) against the
// outcome "drafts 0..k all accepted" (y > k); predictions fall in `bins` equal-width bins of
// [0, 1] and ECE_k = Σ_bins (count / R) · |mean prediction − mean outcome| — DSpark's
// per-position ECE of the cumulative product (its evaluation uses 20 bins). The mean over
// positions weighs them equally (every record covers every position).
//
// Fit. Positions left to right: with T_0 .. T_{k−1} fixed, T_k is the grid value minimising
// ECE_k (ties: the one nearest 1, i.e. the least change). Scaling preserves each position's
// order, so it changes the survival's magnitudes, never the ranking within a position.

#include <cstdint>
#include <vector>

#include "budget/confidence_survival.h"
#include "train/confidence_traces.h"

namespace dscale::train {

inline constexpr int kDefaultEceBins = 20;

// Records of `traces` (indices) in a fit set and a held-out set, disjoint by prompt: prompt id
// p is held out iff p % every == every − 1 (every ≥ 2).
struct TraceSplit {
  std::vector<size_t> fit;
  std::vector<size_t> held_out;
};
TraceSplit SplitByPrompt(const ConfidenceTraces& traces, uint32_t every);

// ECE_k for k = 0..γ−1 over `rows` (all of them when empty) under `calibration`.
std::vector<double> CumulativeSurvivalEce(const ConfidenceTraces& traces,
                                          const std::vector<size_t>& rows,
                                          const budget::ConfidenceCalibration& calibration,
                                          int bins = kDefaultEceBins);
double MeanEce(const std::vector<double>& ece);

// The candidate temperatures: 1 and 241 values log-spaced over [0.05, 20].
std::vector<float> TemperatureGrid();

// T_0 .. T_{γ−1} fitted on `rows` (InvalidArgument when empty).
Result<budget::ConfidenceCalibration> FitSequentialTemperatures(const ConfidenceTraces& traces,
                                                                const std::vector<size_t>& rows,
                                                                int bins = kDefaultEceBins);

}  // namespace dscale::train
