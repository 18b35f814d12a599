#include "train/sts_calibration.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/check.h"

namespace dscale::train {
namespace {

double SurvivalSigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

// Binned ECE of predictions p against 0/1 outcomes.
class EceBins {
 public:
  explicit EceBins(int bins) : count_(bins), predicted_(bins), observed_(bins) {}

  void Add(double p, bool outcome) {
    const int bins = static_cast<int>(count_.size());
    const int b = std::clamp(static_cast<int>(p * bins), 0, bins - 1);
    count_[b] += 1;
    predicted_[b] += p;
    observed_[b] += outcome ? 1.0 : 0.0;
  }

  double Ece() const {
    const double total = std::accumulate(count_.begin(), count_.end(), 0.0);
    if (total == 0) return 0;
    double error = 0;
    for (size_t b = 0; b < count_.size(); ++b) error += std::abs(predicted_[b] - observed_[b]);
    return error / total;
  }

 private:
  std::vector<double> count_, predicted_, observed_;
};

std::vector<size_t> AllRows(const ConfidenceTraces& traces, const std::vector<size_t>& rows) {
  if (!rows.empty()) return rows;
  std::vector<size_t> all(traces.size());
  std::iota(all.begin(), all.end(), size_t{0});
  return all;
}

}  // namespace

TraceSplit SplitByPrompt(const ConfidenceTraces& traces, uint32_t every) {
  DSCALE_CHECK(every >= 2);
  TraceSplit split;
  for (size_t r = 0; r < traces.size(); ++r) {
    (traces.prompt_ids[r] % every == every - 1 ? split.held_out : split.fit).push_back(r);
  }
  return split;
}

std::vector<double> CumulativeSurvivalEce(const ConfidenceTraces& traces,
                                          const std::vector<size_t>& rows,
                                          const budget::ConfidenceCalibration& calibration,
                                          int bins) {
  const int positions = traces.positions;
  std::vector<EceBins> per_position(static_cast<size_t>(positions), EceBins(bins));
  for (size_t r : AllRows(traces, rows)) {
    double survival = 1.0;
    for (int k = 0; k < positions; ++k) {
      survival *= SurvivalSigmoid(double{traces.logits_of(r)[k]} / calibration.Temperature(k));
      per_position[static_cast<size_t>(k)].Add(survival, traces.accepted[r] > uint32_t(k));
    }
  }
  std::vector<double> ece;
  for (const EceBins& b : per_position) ece.push_back(b.Ece());
  return ece;
}

double MeanEce(const std::vector<double>& ece) {
  return ece.empty() ? 0.0 : std::accumulate(ece.begin(), ece.end(), 0.0) / ece.size();
}

std::vector<float> TemperatureGrid() {
  constexpr int kSteps = 240;
  const double lo = std::log(0.05), hi = std::log(20.0);
  std::vector<float> grid{1.0f};
  for (int i = 0; i <= kSteps; ++i) {
    grid.push_back(static_cast<float>(std::exp(lo + (hi - lo) * i / kSteps)));
  }
  return grid;
}

Result<budget::ConfidenceCalibration> FitSequentialTemperatures(const ConfidenceTraces& traces,
                                                                const std::vector<size_t>& rows,
                                                                int bins) {
  if (rows.empty()) return InvalidArgument("no confidence trace records to fit on");
  const int positions = traces.positions;
  const std::vector<float> grid = TemperatureGrid();
  budget::ConfidenceCalibration fitted;
  fitted.records = static_cast<int64_t>(rows.size());
  // prefix[i]: record rows[i]'s calibrated survival through the positions fitted so far.
  std::vector<double> prefix(rows.size(), 1.0);
  for (int k = 0; k < positions; ++k) {
    float best_t = 1.0f;
    double best_ece = INFINITY;
    for (float t : grid) {
      EceBins ece(bins);
      for (size_t i = 0; i < rows.size(); ++i) {
        const size_t r = rows[i];
        ece.Add(prefix[i] * SurvivalSigmoid(double{traces.logits_of(r)[k]} / t),
                traces.accepted[r] > uint32_t(k));
      }
      const double e = ece.Ece();
      const bool nearer_one = std::abs(std::log(t)) < std::abs(std::log(best_t));
      if (e < best_ece || (e == best_ece && nearer_one)) {
        best_ece = e;
        best_t = t;
      }
    }
    fitted.temperatures.push_back(best_t);
    for (size_t i = 0; i < rows.size(); ++i) {
      prefix[i] *= SurvivalSigmoid(double{traces.logits_of(rows[i])[k]} / best_t);
    }
  }
  return fitted;
}

}  // namespace dscale::train
