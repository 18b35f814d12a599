#include "train/predictor_eval.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <utility>

namespace dscale::train {
namespace {

using dvl::kBlockWidth;
using dvl::kDraftPositions;

// Sums of one kind of window over the evaluated records.
struct WindowTotals {
  double retained = 0.0;
  double slots = 0.0;
  void Add(int32_t k, uint32_t y) {
    retained += std::min<double>(y, k - 1);
    slots += k;
  }
};

// Groups record positions (indices into `rows`) by (step, N).
std::map<std::pair<uint32_t, uint32_t>, std::vector<size_t>> Cohorts(
    const std::vector<TraceMeta>& meta, const std::vector<size_t>& rows) {
  std::map<std::pair<uint32_t, uint32_t>, std::vector<size_t>> cohorts;
  for (size_t r = 0; r < rows.size(); ++r) {
    const TraceMeta& m = meta[rows[r]];
    cohorts[{m.step, m.live_count}].push_back(r);
  }
  return cohorts;
}

Status CheckProjectionsMatch(const dvl::Projections& p, const TraceHeader& h) {
  if (p.hidden_size != h.drafter_hidden || p.vocab_size != h.drafter_vocab ||
      p.seed != h.projection_seed) {
    return InvalidArgument(
        "the predictor's projections (hidden " + std::to_string(p.hidden_size) + ", vocab " +
        std::to_string(p.vocab_size) + ", seed " + std::to_string(p.seed) +
        ") differ from the traces' (hidden " + std::to_string(h.drafter_hidden) + ", vocab " +
        std::to_string(h.drafter_vocab) + ", seed " + std::to_string(h.projection_seed) + ")");
  }
  return Status::Ok();
}

}  // namespace

double RSquared(const std::vector<double>& predicted, const std::vector<double>& actual) {
  DSCALE_CHECK(predicted.size() == actual.size());
  if (actual.empty()) return 0.0;
  const double mean =
      std::accumulate(actual.begin(), actual.end(), 0.0) / static_cast<double>(actual.size());
  double ss_res = 0.0;
  double ss_tot = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    ss_res += (actual[i] - predicted[i]) * (actual[i] - predicted[i]);
    ss_tot += (actual[i] - mean) * (actual[i] - mean);
  }
  if (ss_tot == 0.0) return ss_res == 0.0 ? 1.0 : 0.0;
  return 1.0 - ss_res / ss_tot;
}

double PredictedAcceptedCount(const float* logits) {
  float q[kBlockWidth];
  dvl::PrefixScoresFromLogits(logits, 1, kBlockWidth, q);
  double sum = 0.0;
  for (int j = 1; j < kBlockWidth; ++j) sum += q[j];
  return sum;
}

Result<EvalReport> EvaluateLogits(const std::vector<float>& logits,
                                  const std::vector<TraceMeta>& meta,
                                  const std::vector<size_t>& rows, double verify_budget) {
  if (rows.empty()) return InvalidArgument("no records to evaluate");
  DSCALE_CHECK(logits.size() == rows.size() * kDraftPositions);
  EvalReport report;
  report.records = static_cast<int64_t>(rows.size());
  std::vector<double> predicted(rows.size());
  std::vector<double> actual(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    predicted[r] = PredictedAcceptedCount(logits.data() + r * kDraftPositions);
    actual[r] = meta[rows[r]].accepted;
  }
  report.r2 = RSquared(predicted, actual);
  const double n = static_cast<double>(rows.size());
  report.mean_accepted = std::accumulate(actual.begin(), actual.end(), 0.0) / n;
  report.mean_predicted = std::accumulate(predicted.begin(), predicted.end(), 0.0) / n;

  WindowTotals raw;
  WindowTotals adjusted;
  std::vector<float> cohort_logits;
  for (const auto& [key, members] : Cohorts(meta, rows)) {
    ++report.cohorts;
    cohort_logits.clear();
    for (size_t r : members) {
      const float* src = logits.data() + r * kDraftPositions;
      cohort_logits.insert(cohort_logits.end(), src, src + kDraftPositions);
    }
    const int64_t size = static_cast<int64_t>(members.size());
    DSCALE_ASSIGN_OR_RETURN(const int64_t budget,
                            dvl::BudgetFromFraction(size, kBlockWidth, verify_budget));
    DSCALE_ASSIGN_OR_RETURN(const dvl::Allocation a,
                            dvl::AllocateFromLogits(cohort_logits.data(), size, budget));
    for (size_t c = 0; c < members.size(); ++c) {
      const uint32_t y = meta[rows[members[c]]].accepted;
      raw.Add(a.seed[c], y);
      adjusted.Add(a.k[c], y);
    }
  }
  const double accepted_total = report.mean_accepted * n;
  report.retention_raw = accepted_total > 0 ? raw.retained / accepted_total : 1.0;
  report.retention_adjusted = accepted_total > 0 ? adjusted.retained / accepted_total : 1.0;
  report.mean_window_raw = raw.slots / n;
  report.mean_window_adjusted = adjusted.slots / n;
  return report;
}

Result<EvalReport> EvaluatePredictor(const dvl::Predictor& predictor, const TraceSet& traces,
                                     const std::vector<size_t>& rows, double verify_budget) {
  DSCALE_RETURN_IF_ERROR(CheckProjectionsMatch(predictor.projections(), traces.header));
  std::vector<size_t> all;
  const std::vector<size_t>* selected = &rows;
  if (rows.empty()) {
    all.resize(traces.size());
    std::iota(all.begin(), all.end(), size_t{0});
    selected = &all;
  }
  std::vector<float> logits(selected->size() * kDraftPositions);
  for (size_t r = 0; r < selected->size(); ++r) {
    predictor.Forward(traces.features_of((*selected)[r]), 1, logits.data() + r * kDraftPositions);
  }
  return EvaluateLogits(logits, traces.meta, *selected, verify_budget);
}

}  // namespace dscale::train
