#pragma once
// --verify-budget auto: per decode step, the draft rows M the drafted requests verify, chosen to
// maximise expected committed tokens per second, M* = argmax_M (other + E'(M)) / (draft_s +
// feed · E'(M) + V(other + M)) over M ∈ [n, W·n], with E from dvl/budget_curve.h and the times
// from step_cost_model.h; and whether to draft at all (speculate / plain modes with probes), after
// a cold-start ramp and with exploration, each within a loss budget against plain decoding. The
// rules and their bounds: docs/VERIFY_BUDGET.md. k depends only on the drafts and on timings,
// never on the acceptance randomness, so losslessness does not depend on any of this.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "budget/expert_cost_model.h"
#include "budget/step_cost_model.h"
#include "dvl/budget_curve.h"

namespace dscale::budget {

struct AutoBudgetOptions {
  int width = 16;              // W
  int32_t max_requests = 256;  // N at most (the cost model's range is W · this)
  bool cold_start = true;      // false: trust the fit (and its prior) from the first step (tests)
  double explore_allowance_steps = 2;  // loss budget: this many plain steps, plus
  double explore_share = 0.02;         // this share of the run's time so far
  int explore_every = 32;
  int ramp_wait_steps = 32;  // a ramp step the budget allows within this many plain steps waits
  double smoothing = 0.25;   // weight of the newest drafted step in g
  double calibration_smoothing = 1.0 / 32;  // and in the calibration
  double margin = 0.03;
  int32_t probe_period = 1;
  int32_t max_probe_period = 1024;
  int32_t probe_draft_every = 4;
  // A failed probe whose requests keep their draft contexts (below) doubles the spacing of its
  // next one's drafted steps, up to this.
  int32_t max_probe_draft_every = 256;
  int32_t probe_steps = 4;  // drafted steps a probe has to turn auto to speculation
  // Turning to plain at one request keeps its draft context (a pause, probed) where feeding it
  // costs at most this share of the loss budget's growth per plain step (explore_share · V(1));
  // dearer feeding, or more requests, drop them.
  double pause_feed_share = 0.5;
  // A mixture of experts whose draft rows are priced by the experts they wake
  // (expert_cost_model.h); none: by rows alone.
  ExpertShape experts;
  // The engine holds a plain step's fed rows on the host and appends them right before the
  // request next drafts (engine/held_context.h): keeping a context costs a copy a step, whatever
  // feeding it row by row would.
  bool held_draft_contexts = false;
};

enum class AutoMode { kSpeculate, kPlain };
const char* AutoModeName(AutoMode mode);  // "speculate", "plain"

// What /metrics and reports show.
struct AutoBudgetSnapshot {
  AutoMode mode = AutoMode::kSpeculate;
  int64_t last_rows = 0;      // M of the latest drafted step (its drafted requests' rows)
  // That step's M* (before a ramp, probe or exploration moved it), and the verify seconds and
  // committed tokens (every request's, anchors included) the controller predicted for M: what
  // a step trace compares with the step's measured ones.
  int64_t last_best_rows = 0;
  double last_verify_predicted_s = 0;
  double last_tokens_predicted = 0;
  int32_t last_drafted = 0;   // n of that step
  double gain = 0;            // smoothed g (0 until the first ramp step)
  double step_gain = 0;       // the latest step's fleet gain (0: that step computed none)
  bool cold_start = false;    // the ramp is still running
  double explore_loss_s = 0;  // exploration's measured loss against plain decoding
  double explore_budget_s = 0;  // what it may lose by now (at the latest step's requests)
  double calibration = 1;
  int64_t drafted_steps = 0;
  int64_t plain_steps = 0;
  int64_t prompt_steps = 0;  // drafted while plain, for the experts their prompts woke
  double feed_s_per_row = 0;
  RooflineFit verify_fit;  // V(rows) ≈ max(a + b·rows, c·rows)
  RooflineFit draft_fit;   // D(requests)
  int verify_bins = 0;
  int64_t verify_samples = 0;
  double verify_min_rows = 0, verify_max_rows = 0;  // the range V has seen
  // A mixture of experts priced by its experts (expert_cost_model.h): whether, σ, ρ, r (seconds
  // per draft row), and the experts a request's 16 rows add to its first one's.
  bool experts_priced = false;
  double expert_sharing = 0, expert_time_ratio = 0, expert_row_s = 0, expert_own_rows = 0;
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

  // At admission: whether the new request gets a draft context (in plain mode: a probe's, or
  // any where the engine holds plain steps' rows).
  bool FeedNewRequest();
  // Before drafting, with `fed` of the step's `requests` able to use a draft (a draft context
  // and more than one token left), and the rows of the prompt chunks riding in the step's
  // verify pass (mixed prefill): how many of the fed requests this step drafts (0: a plain
  // step), in [0, fed]. On a sparse target priced by its experts, draft rows in a pass whose
  // prompts wake most experts cost little more than their arithmetic: while decoding plainly,
  // such a step drafts where the latest drafted step's curve says that pays (a prompt step).
  int32_t DraftCount(int32_t fed, int32_t requests, std::span<const int32_t> prompt_chunks = {});
  // What the curve's draft rows cost at each position in a request (ExpectedTokensCurve's
  // row_costs): a sparse target's experts they add (expert_cost_model.h); empty otherwise.
  std::span<const double> RowCosts() const;
  // After drafting the curve's n requests (`other` more verify their anchor only);
  // `draft_s`: seconds this step has spent drafting and deciding so far. Returns M, priced with
  // the experts the step's prompt chunks (DraftCount's) wake.
  int64_t ChooseRows(const dvl::BudgetCurve& curve, int64_t other, double draft_s);
  // After the step: its timings, and the tokens the drafted requests committed.
  void Record(const StepSample& sample, int64_t drafted_committed);

  // True once after each switch to plain that drops the draft contexts, and after a failed
  // probe or pause whose requests' feeding is too dear to keep: the caller stops feeding the
  // running requests.
  bool TakeDetach();

  AutoMode mode() const { return mode_; }
  const StepCostModel& model() const { return model_; }
  // The sparse target's expert model; null for a dense one (or rows priced alone).
  const ExpertCostModel* experts() const { return experts_ ? &*experts_ : nullptr; }
  AutoBudgetSnapshot Snapshot() const;

 private:
  // Tokens per second of the best M, and of plain decoding, for all `total` requests drafted
  // with the curve's per-request expectations. past_seen: how verify costs past the largest
  // rows seen count — as the fit extrapolates them, at their lower bound (the cost of the
  // largest seen), or not at all (only M within the rows seen compete).
  // A sparse target priced by its experts ignores kFree: its draft rows cost what the expert
  // model predicts.
  enum class PastSeen { kExtrapolate, kFree, kExcluded };
  // `prompt_experts`: those the step's prompt chunks wake (ExpertCostModel::PromptExperts).
  double FleetGain(const dvl::BudgetCurve& curve, int64_t total, double draft_s, PastSeen past_seen,
                   double prompt_experts = 0) const;
  // A verify step of `rows` rows over `requests` requests whose draft rows cost `cost`
  // (BudgetCurve::CostAt): priced by the experts they wake on a sparse target once plain steps
  // have shown its anchors' experts (those prompt chunks in its pass wake, `prompt_experts`,
  // awake already, and the prompts' own time left out), else by the rows curve.
  double VerifySeconds(double rows, int64_t requests, double cost, double prompt_experts = 0) const;
  // While decoding plainly: whether drafting the step's `requests` pays with the experts its
  // prompt chunks wake (prompt_experts_) awake, by the latest drafted step's curve.
  bool PromptStepPays(int32_t requests) const;
  // The fleet gain of the latest ramp step's curve over the rows measured only.
  double MeasuredGain(int32_t requests) const;
  int64_t ExploreRows(int64_t best, int64_t n);
  // Rows of the next ramp step for n drafted requests (the ramp's M).
  int64_t RampRows(int64_t n) const;
  // Requests the next anchors-only ramp step drafts after one that drafted n.
  int32_t NextRampRequests(int32_t n, int32_t requests) const;
  // Whether a ramp step's verify time exceeds what subadditivity allows from the previous one.
  bool LooksSlowed(const StepSample& sample) const;
  // After a ramp step: turn to plain, climb further, or end the ramp.
  void AdvanceRamp(const StepSample& sample);
  // Whether a step drafting n of `requests` and verifying `rows` in all fits the loss budget.
  bool Affordable(int64_t n, int64_t rows, int32_t requests) const;
  // By how many seconds that step's worst-case loss exceeds the budget left (≤ 0: it fits).
  double BudgetShortfall(int64_t n, int64_t rows, int32_t requests) const;
  // The loss exploration may have taken by now, with `requests` running.
  double ExploreBudget(int32_t requests) const;
  // Whether the ramp's next step (which does not fit yet) is worth waiting for in plain steps.
  bool RampCanWait(int64_t n, int64_t rows, int32_t requests) const;
  // Seconds per token of plain decoding with `requests` running (the fitted V(N) / N).
  double PlainSecondsPerToken(int32_t requests) const;
  // Whether the running requests (`fed` of `requests` with draft contexts) keep them through
  // plain steps: any whose rows are held (options_.held_draft_contexts), or one request whose
  // feeding costs at most pause_feed_share of the loss budget's growth per step.
  bool CanKeepContexts(int32_t fed, int32_t requests) const;
  // To plain decoding: the running requests keep their draft contexts and are probed (a pause),
  // or drop them now (TakeDetach).
  void SwitchToPlain(bool keep_contexts);
  // A probe (or pause) that did not turn auto to speculation: its requests keep their contexts,
  // the next probe's drafted steps twice as far apart, where CanKeepContexts; else they drop them.
  void EndFailedProbe(int32_t fed, int32_t requests);
  // Realized / predicted speculative tokens (smoothed), in [0.25, 2]; 1 before any evidence.
  double Calibration() const;
  // g's update by one drafted step's fleet gain; fresh: g starts again from it.
  void AddGainSample(double gain, bool fresh);
  void UpdateMode();

  AutoBudgetOptions options_;
  StepCostModel model_;
  std::optional<ExpertCostModel> experts_;
  AutoMode mode_ = AutoMode::kSpeculate;
  enum class Ramp { kRequests, kRows, kDone };
  Ramp ramp_ = Ramp::kRequests;
  int32_t ramp_drafted_ = 1;    // kRequests: requests the next ramp step drafts
  int32_t ramp_fed_ = 0;        // fed requests at the latest ramp step
  bool ramp_repeated_ = false;  // kRows: the current rows were taken twice
  bool ramp_waiting_ = false;   // this step waits for the budget (a plain step, still fed)
  int64_t ramp_prev_rows_ = 0;  // the previous ramp step's rows and verify seconds
  double ramp_prev_verify_s_ = 0;
  int ramp_losing_steps_ = 0;    // consecutive ramp steps with g < 1 − margin
  int64_t ramp_width_ = 2;       // kRows: rows per drafted request of the next ramp step
  dvl::BudgetCurve ramp_curve_;  // the latest ramp step's curve, for AdvanceRamp
  int64_t ramp_other_ = 0;
  // Loss budget: exploration's loss so far, and all recorded steps' seconds.
  double explore_loss_s_ = 0, run_s_ = 0;
  int64_t drafted_steps_ = 0, plain_steps_ = 0, explore_turn_ = 0;
  int32_t admissions_ = 0, probe_period_;
  int32_t probe_steps_ = 0;  // drafted steps of the current probe
  int32_t probe_draft_every_;  // plain steps between a probe's drafted steps (doubling, above)
  int64_t plain_clock_ = 0;
  bool detach_ = false;
  // Set by ChooseRows, consumed by Record.
  bool pending_ = false;
  int32_t pending_n_ = 0;
  double pending_expected_ = 0;   // E(M) of the chosen M, uncalibrated
  double pending_cost_ = 0;       // the chosen M's row cost (BudgetCurve::CostAt)
  double pending_gain_ = 0;       // 0: not counted (a ramp step)
  bool pending_explore_ = false;  // a ramp or exploration step: its loss is charged
  // The experts the current step's prompt chunks wake (0: none, or not priced by experts), set by
  // DraftCount and read until the step's Record; whether it drafts while decoding plainly for
  // them (PromptStepPays).
  double prompt_experts_ = 0;
  bool prompt_step_ = false;
  dvl::BudgetCurve last_curve_;  // the latest drafted step's on a sparse target (n = 0: none yet)
  int64_t prompt_steps_ = 0;           // steps drafted while plain for their prompts
  int64_t last_rows_ = 0;
  int64_t last_best_rows_ = 0;
  double last_verify_predicted_s_ = 0, last_tokens_predicted_ = 0;
  int32_t last_requests_ = 0;  // N of the latest recorded step
  double last_step_gain_ = 0;  // that step's fleet gain (0: none computed)
  int32_t last_drafted_ = 0;
  // Smoothed state.
  double gain_ = 0;
  int64_t gain_samples_ = 0;  // samples in g since its latest fresh start (0: g not set yet)
  // Decayed sums of the drafted steps' realized and predicted draft tokens, and the weight the
  // prior (a calibrated predictor) keeps beside them.
  double realized_extra_ = 0, predicted_extra_ = 0;
  double calibration_prior_weight_ = 1;
};

}  // namespace dscale::budget
