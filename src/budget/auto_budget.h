#pragma once
// --verify-budget auto: per decode step, the number of draft rows M the drafted requests verify,
// chosen to maximise expected committed tokens per second,
//
//   M* = argmax_M  (other + E'(M)) / (draft_s + feed · E'(M) + V(other + M)),
//
// where E(M) is the predictor's expected-token curve under Algorithm 1's split for every M
// (dvl/budget_curve.h), E' = n + calibration · (E − n) corrects it by the tokens the drafted
// steps actually committed, `other` requests verify only their anchor this step, and the times
// come from the step-cost model fitted online (step_cost_model.h). M ranges over [n, W·n]: its
// minimum verifies every anchor only, a plain decoding step after a wasted draft.
//
// Whether to draft at all is decided before drafting, so it rests on what past steps showed:
// the gain g = best speculative rate / plain rate, computed at each drafted step as if all N
// running requests were drafted with the same per-request expectations, and smoothed. Two modes:
//   speculate  every new request gets a draft context and every step drafts; switches to plain
//              when the smoothed g < 1 − margin, and then the running requests drop their draft
//              contexts too (TakeDetach), so plain steps start at once
//   plain      new requests get no draft context (steps cost exactly what --spec none costs),
//              except probes: every probe_period-th admission (the period doubling per probe,
//              up to max_probe_period); fed requests are drafted every probe_draft_every-th
//              step, and their g switches back to speculate when it exceeds 1 + margin
// Cold start: the first drafted steps verify cold_fractions of W·n in turn (the paper's 1/2
// first), so the fit sees several row counts before the objective decides; no mode switch
// before they are done. Then every explore_every-th drafted step verifies a neighbour of M*
// (3/4 M*, 5/4 M*, 3/4 M*, then n: anchors only, the plain step's row count) to keep the fit
// current around the choice and at plain decoding's point.
//
// Losslessness does not depend on any of this: k is a function of the drafts and of timings,
// never of the acceptance randomness.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "budget/step_cost_model.h"
#include "dvl/budget_curve.h"

namespace dscale::budget {

struct AutoBudgetOptions {
  int width = 16;              // W
  int32_t max_requests = 256;  // N at most (the cost model's range is W · this)
  std::vector<double> cold_fractions = {0.5, 1.0 / 16, 1.0, 0.25};
  int explore_every = 32;
  double smoothing = 0.25;  // weight of the newest drafted step in g and the calibration
  double margin = 0.03;
  int32_t probe_period = 32;
  int32_t max_probe_period = 1024;
  int32_t probe_draft_every = 4;
};

enum class AutoMode { kSpeculate, kPlain };
const char* AutoModeName(AutoMode mode);  // "speculate", "plain"

// What /metrics and reports show.
struct AutoBudgetSnapshot {
  AutoMode mode = AutoMode::kSpeculate;
  int64_t last_rows = 0;     // M of the latest drafted step (its drafted requests' rows)
  int32_t last_drafted = 0;  // n of that step
  double gain = 0;           // smoothed g (0 until the cold steps are done)
  double calibration = 1;
  int64_t drafted_steps = 0;
  int64_t plain_steps = 0;
  double feed_s_per_row = 0;
  RooflineFit verify_fit;  // V(rows) ≈ max(a + b·rows, c·rows)
  RooflineFit draft_fit;   // D(requests)
  int verify_bins = 0;
  int64_t verify_samples = 0;
  double verify_min_rows = 0, verify_max_rows = 0;  // the range V has seen
};

// Expected committed tokens at M rows for the curve's requests plus `other` anchor-only ones,
// with the speculative part scaled by `calibration`.
double ExpectedTokens(const dvl::BudgetCurve& curve, int64_t rows, int64_t other,
                      double calibration);

// argmax over M in [curve.min_rows(), curve.max_rows()] of ExpectedTokens / seconds(M); ties go
// to the smaller M. `seconds` must be positive.
int64_t BestRows(const dvl::BudgetCurve& curve, int64_t other, double calibration,
                 const std::function<double(int64_t)>& seconds);

class AutoBudget {
 public:
  explicit AutoBudget(AutoBudgetOptions options = {});

  // At admission: whether the new request gets a draft context.
  bool FeedNewRequest();
  // Before drafting, with `fed` of the step's requests holding a draft context.
  bool DraftThisStep(int32_t fed);
  // After drafting the curve's n requests (`other` more verify their anchor only);
  // `draft_s`: seconds this step has spent drafting and deciding so far. Returns M.
  int64_t ChooseRows(const dvl::BudgetCurve& curve, int64_t other, double draft_s);
  // After the step: its timings, and the tokens the drafted requests committed.
  void Record(const StepSample& sample, int64_t drafted_committed);

  // True once after each switch to plain: the caller stops feeding the running requests.
  bool TakeDetach();

  AutoMode mode() const { return mode_; }
  const StepCostModel& model() const { return model_; }
  AutoBudgetSnapshot Snapshot() const;

 private:
  // Tokens per second of the best M, and of plain decoding, for all `total` requests drafted
  // with the curve's per-request expectations.
  double FleetGain(const dvl::BudgetCurve& curve, int64_t total, double draft_s) const;
  int64_t ExploreRows(int64_t best, int64_t n);
  // Realized / predicted speculative tokens (smoothed), in [0.25, 2]; 1 before any evidence.
  double Calibration() const;
  void UpdateMode();

  AutoBudgetOptions options_;
  StepCostModel model_;
  AutoMode mode_ = AutoMode::kSpeculate;
  size_t cold_done_ = 0;  // cold steps taken
  int64_t drafted_steps_ = 0, plain_steps_ = 0, explore_turn_ = 0;
  int32_t admissions_ = 0, probe_period_;
  int64_t plain_clock_ = 0;
  bool detach_ = false;
  // Set by ChooseRows, consumed by Record.
  bool pending_ = false;
  int32_t pending_n_ = 0;
  double pending_expected_ = 0;  // E(M) of the chosen M, uncalibrated
  double pending_gain_ = 0;      // 0: not counted (a cold step)
  int64_t last_rows_ = 0;
  int32_t last_drafted_ = 0;
  // Smoothed state.
  double gain_ = 0;
  bool gain_set_ = false;
  double realized_extra_ = 0, predicted_extra_ = 0;
};

}  // namespace dscale::budget
