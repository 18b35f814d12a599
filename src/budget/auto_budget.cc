#include "budget/auto_budget.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/check.h"

namespace dscale::budget {

const char* AutoModeName(AutoMode mode) {
  return mode == AutoMode::kSpeculate ? "speculate" : "plain";
}

double ExpectedTokens(const dvl::BudgetCurve& curve, int64_t rows, int64_t other,
                      double calibration) {
  const auto n = static_cast<double>(curve.n);
  return static_cast<double>(other) + n + calibration * (curve.At(rows) - n);
}

int64_t BestRows(const dvl::BudgetCurve& curve, int64_t other, double calibration,
                 const std::function<double(int64_t)>& seconds) {
  int64_t best = curve.min_rows();
  double best_rate = -1;
  for (int64_t m = curve.min_rows(); m <= curve.max_rows(); ++m) {
    const double s = seconds(m);
    DSCALE_CHECK(s > 0);
    const double rate = ExpectedTokens(curve, m, other, calibration) / s;
    if (rate > best_rate) {
      best_rate = rate;
      best = m;
    }
  }
  return best;
}

AutoBudget::AutoBudget(AutoBudgetOptions options)
    : options_(std::move(options)),
      model_(int64_t{options_.width} * options_.max_requests, options_.max_requests),
      probe_period_(options_.probe_period),
      probe_draft_every_(options_.probe_draft_every) {
  DSCALE_CHECK(options_.width >= 2 && options_.max_requests >= 1);
  DSCALE_CHECK(options_.explore_every >= 1 && options_.probe_draft_every >= 1);
  DSCALE_CHECK(options_.max_probe_draft_every >= options_.probe_draft_every);
  DSCALE_CHECK(options_.pause_feed_share >= 0);
  DSCALE_CHECK(options_.ramp_wait_steps >= 0 && options_.probe_steps >= 1);
  DSCALE_CHECK(options_.calibration_smoothing > 0 && options_.calibration_smoothing <= 1);
  DSCALE_CHECK(options_.probe_period >= 1 && options_.smoothing > 0 && options_.smoothing <= 1);
  DSCALE_CHECK(options_.explore_allowance_steps >= 0 && options_.explore_share >= 0);
  if (!options_.cold_start) ramp_ = Ramp::kDone;
  if (options_.experts.sparse()) {
    experts_.emplace(options_.experts, options_.width, options_.max_requests);
  }
}

std::span<const double> AutoBudget::RowCosts() const {
  if (!experts_) return {};
  return experts_->row_costs();
}

double AutoBudget::VerifySeconds(double rows, int64_t requests, double cost,
                                 double prompt_experts) const {
  if (experts_ && experts_->ready() && rows > double(requests)) {
    return experts_->VerifySeconds(static_cast<int32_t>(requests), rows - double(requests), cost,
                                   model_.VerifySeconds(double(requests)), prompt_experts);
  }
  return model_.VerifySeconds(rows);
}

// Where the engine holds plain steps' rows (options_.held_draft_contexts), every new request
// keeps a draft context at the cost of a copy a step, so that speculation, once a probe shows it
// pays, has every running request to draft (at sixteen requests of which a probe's four alone had
// contexts, auto drafted those four and decoded the rest plainly); only a probe admission starts
// a probe.
bool AutoBudget::FeedNewRequest() {
  if (mode_ == AutoMode::kSpeculate) return true;
  if (++admissions_ < probe_period_) return options_.held_draft_contexts;
  admissions_ = 0;
  probe_period_ = std::min(2 * probe_period_, options_.max_probe_period);
  // A new request is new evidence: its probe starts at the first spacing, whatever the failed
  // probes of a request kept before it backed off to.
  probe_steps_ = 0;
  probe_draft_every_ = options_.probe_draft_every;
  plain_clock_ = 0;
  return true;
}

int32_t AutoBudget::DraftCount(int32_t fed, int32_t requests,
                               std::span<const int32_t> prompt_chunks) {
  prompt_step_ = false;
  prompt_experts_ = experts_ && experts_->ready() && !prompt_chunks.empty()
                        ? experts_->PromptExperts(prompt_chunks)
                        : 0.0;
  if (fed == 0) return 0;
  if (mode_ == AutoMode::kPlain) {
    // Not exploration: the step's prompts wake the experts the drafts would, so it is judged on
    // its own prediction, and leaves the mode and the probes' schedule as they were.
    if (prompt_experts_ > 0 && ramp_ == Ramp::kDone && PromptStepPays(requests)) {
      prompt_step_ = true;
      return fed;
    }
    // A probe step is exploration: taken only where drafting its requests (anchors only, the
    // least it can verify) fits the loss budget, and charged to it.
    if (++plain_clock_ % probe_draft_every_ != 0) return 0;
    return Affordable(fed, requests, requests) ? fed : 0;
  }
  if (ramp_ == Ramp::kDone) return fed;
  ramp_fed_ = fed;
  const int32_t n = ramp_ == Ramp::kRequests ? std::min(fed, ramp_drafted_) : fed;
  const int64_t rows = requests - n + RampRows(n);
  if (Affordable(n, rows, requests)) return n;
  // The budget grows with the run: a step that fits it within a few plain steps waits for it,
  // where the ramp's evidence says speculation could pay.
  if (RampCanWait(n, rows, requests)) {
    ramp_waiting_ = true;
    return 0;
  }
  // The ramp stops where its next step could lose more than the budget allows, soon. What it
  // has measured decides: if speculation already pays within the rows measured, every fed
  // request goes on drafting (the fit decides M from here); otherwise plain decoding is the
  // safe choice, and probes keep gathering evidence at their own small cost.
  ramp_ = Ramp::kDone;
  if (gain_samples_ > 0 && MeasuredGain(requests) > 1 + options_.margin) return fed;
  SwitchToPlain(/*keep_contexts=*/CanKeepContexts(fed, requests));
  return 0;
}

bool AutoBudget::PromptStepPays(int32_t requests) const {
  if (last_curve_.n == 0) return false;
  return FleetGain(last_curve_, requests, model_.DraftSeconds(requests), PastSeen::kExtrapolate,
                   prompt_experts_) > 1 + options_.margin;
}

double AutoBudget::MeasuredGain(int32_t requests) const {
  return FleetGain(ramp_curve_, requests, model_.DraftSeconds(requests), PastSeen::kExcluded);
}

int64_t AutoBudget::RampRows(int64_t n) const {
  if (ramp_ == Ramp::kRequests) return n;
  return std::min<int64_t>(ramp_width_, options_.width) * n;
}

double AutoBudget::PlainSecondsPerToken(int32_t requests) const {
  return model_.VerifySeconds(requests) / requests;
}

// Where the engine holds the rows, a plain step copies each request's one committed row and the
// rows join the contexts in one pass at the next probe (charged to it), so every running request
// keeps its context: a request can be fed only from its admission. Otherwise only one request:
// with one running no admission comes before it ends, so dropping its context decodes the rest
// of its text plainly; with more, their ends bring admissions and probes, and re-probing the same
// requests fed row by row (their gain averaged over them) cost about 1% of the run in the
// simulated loop where nothing paid. A plain step feeds the one request its one row; the loss
// budget grows by explore_share of each step, so feeding within a share of that growth leaves
// the rest for the probes and keeps the loss bounded by the budget however long the text runs.
bool AutoBudget::CanKeepContexts(int32_t fed, int32_t requests) const {
  if (options_.held_draft_contexts) return true;
  if (requests != 1) return false;
  if (model_.verify().samples() == 0) return true;
  const double feed_s = model_.FeedSecondsPerRow() * double(fed);
  return feed_s <=
         options_.pause_feed_share * options_.explore_share * model_.VerifySeconds(requests);
}

// Worst case from what was measured: the largest n₀ and x₀ seen bound D and V past them
// proportionally (subadditivity), and the step commits plain's N tokens only. The first drafted
// step has nothing to bound it with; drafting one request's anchor is the least it can risk.
bool AutoBudget::Affordable(int64_t n, int64_t rows, int32_t requests) const {
  if (model_.draft().samples() == 0 || model_.verify().samples() == 0) return true;
  return BudgetShortfall(n, rows, requests) <= 0;
}

double AutoBudget::BudgetShortfall(int64_t n, int64_t rows, int32_t requests) const {
  const auto bound = [](const CostCurve& curve, double x) {
    const double seen = curve.max_observed_x();
    return x <= seen ? curve.Predict(x) : curve.Predict(seen) * x / seen;
  };
  const double worst_loss = bound(model_.draft(), double(n)) +
                            bound(model_.verify(), double(rows)) - model_.VerifySeconds(requests);
  return explore_loss_s_ + worst_loss - ExploreBudget(requests);
}

double AutoBudget::ExploreBudget(int32_t requests) const {
  return options_.explore_allowance_steps * model_.VerifySeconds(requests) +
         options_.explore_share * run_s_;
}

// A waiting step is a plain step whose fed requests still feed their draft contexts; that
// feeding is charged to the loss (Record), so the budget grows per waiting step by
// explore_share of a plain step less the feeding. Waiting is for a ramp whose latest gain, with
// rows past those seen free (an upper bound), does not yet show a loss, and a step that fits
// within ramp_wait_steps.
bool AutoBudget::RampCanWait(int64_t n, int64_t rows, int32_t requests) const {
  if (gain_samples_ == 0 || gain_ < 1 - options_.margin) return false;
  const double plain_s = model_.VerifySeconds(requests);
  const double growth =
      options_.explore_share * plain_s - model_.FeedSecondsPerRow() * double(ramp_fed_);
  if (growth <= 0) return false;
  return BudgetShortfall(n, rows, requests) <= growth * options_.ramp_wait_steps;
}

double AutoBudget::FleetGain(const dvl::BudgetCurve& curve, int64_t total, double draft_s,
                             PastSeen past_seen, double prompt_experts) const {
  const double seen = model_.verify().max_observed_x();
  const auto verify_s = [&](double rows, double cost) {
    if (experts_ && experts_->ready()) {
      return VerifySeconds(rows, total, cost, prompt_experts);
    }
    return model_.VerifySeconds(past_seen == PastSeen::kFree ? std::min(rows, seen) : rows);
  };
  const double n = static_cast<double>(curve.n);
  const double scale = static_cast<double>(total) / n;
  const double calibration = Calibration();
  const double feed = model_.FeedSecondsPerRow();
  const double draft = curve.n == total ? draft_s : model_.DraftSeconds(static_cast<double>(total));
  double best_rate = 0;
  for (int64_t m = curve.min_rows(); m <= curve.max_rows(); ++m) {
    if (past_seen == PastSeen::kExcluded && m > curve.min_rows() && scale * double(m) > seen) {
      break;
    }
    const double tokens = scale * ExpectedTokens(curve, m, 0, calibration);
    const double seconds =
        draft + feed * tokens + verify_s(scale * double(m), scale * curve.CostAt(m));
    best_rate = std::max(best_rate, tokens / seconds);
  }
  const double plain_rate = static_cast<double>(total) / model_.VerifySeconds(total);
  return best_rate / plain_rate;
}

bool AutoBudget::TakeDetach() {
  const bool detach = detach_;
  detach_ = false;
  return detach;
}

int64_t AutoBudget::ExploreRows(int64_t best, int64_t n) {
  const int64_t full = int64_t{options_.width} * n;
  switch (explore_turn_++ % 4) {
    case 0:
    case 2:
      return std::max(n, best * 3 / 4);
    case 1:
      return std::min(full, (best * 5 + 3) / 4);
    default:
      return n;
  }
}

int64_t AutoBudget::ChooseRows(const dvl::BudgetCurve& curve, int64_t other, double draft_s) {
  const int64_t n = curve.n;
  const double calibration = Calibration();
  const double feed = model_.FeedSecondsPerRow();
  const auto seconds = [&](int64_t m) {
    const double fed_tokens = ExpectedTokens(curve, m, 0, calibration);
    return std::max(
        1e-9, draft_s + feed * fed_tokens +
                  VerifySeconds(double(other + m), n + other, curve.CostAt(m), prompt_experts_));
  };
  const int64_t best = BestRows(curve, other, calibration, seconds);
  int64_t rows = best;
  pending_gain_ = 0;
  pending_explore_ = false;
  if (prompt_step_) {
    ++prompt_steps_;  // rows = M*, uncharged, no gain sample (DraftCount)
  } else if (ramp_ != Ramp::kDone) {
    rows = std::clamp(RampRows(n), n, curve.max_rows());
    ramp_curve_ = curve;
    ramp_other_ = other;
    pending_explore_ = true;
  } else if (mode_ == AutoMode::kPlain) {
    // A probe: the most rows up to M* that fit the loss budget (anchors only did, in DraftCount).
    pending_gain_ = FleetGain(curve, n + other, draft_s, PastSeen::kExtrapolate);
    pending_explore_ = true;
    const auto requests = static_cast<int32_t>(n + other);
    while (rows > n && !Affordable(n, other + rows, requests)) --rows;
  } else {
    pending_gain_ = FleetGain(curve, n + other, draft_s, PastSeen::kExtrapolate);
    if ((drafted_steps_ + 1) % options_.explore_every == 0) {
      const int64_t explore = ExploreRows(best, n);
      const auto requests = static_cast<int32_t>(n + other);
      if (Affordable(n, other + explore, requests)) {
        rows = explore;
        pending_explore_ = true;
      }
    }
  }
  ++drafted_steps_;
  pending_ = true;
  pending_n_ = static_cast<int32_t>(n);
  pending_expected_ = curve.At(rows);
  pending_cost_ = curve.CostAt(rows);
  if (experts_) {  // PromptStepPays's curve (a dense target has no prompt steps)
    last_curve_.n = curve.n;
    last_curve_.width = curve.width;
    last_curve_.tokens.assign(curve.tokens.begin(), curve.tokens.end());
    last_curve_.cost.assign(curve.cost.begin(), curve.cost.end());
  }
  last_rows_ = rows;
  last_best_rows_ = best;
  last_verify_predicted_s_ =
      VerifySeconds(double(other + rows), n + other, curve.CostAt(rows), prompt_experts_);
  last_tokens_predicted_ = ExpectedTokens(curve, rows, other, calibration);
  last_drafted_ = static_cast<int32_t>(n);
  return rows;
}

// A step whose pass also ran prompt rows (mixed prefill) timed them with its verify: the fits
// learn nothing of the verify from it, the step counts as taking the verify time they predict
// (with the experts its prompts woke awake), and a ramp step is taken again (its rows are still
// unmeasured).
void AutoBudget::Record(const StepSample& measured, int64_t drafted_committed) {
  const bool chosen = measured.drafted > 0 && pending_;
  const double cost = chosen ? pending_cost_ : 0.0;
  StepSample sample = measured;
  if (!measured.VerifyTimed()) {
    sample.verify_s = VerifySeconds(double(measured.rows), measured.requests, cost,
                                    chosen ? prompt_experts_ : 0.0);
  }
  if (experts_) {
    experts_->AddOccupancy(sample.occupancy);
    const int64_t draft_rows = std::max<int64_t>(0, sample.rows - sample.requests);
    if (measured.VerifyTimed()) {
      experts_->AddStep(sample.requests, draft_rows, cost, sample.experts, sample.verify_s,
                        model_.VerifySeconds(double(sample.requests)));
    }
  }
  model_.Add(sample);
  last_requests_ = sample.requests;
  last_step_gain_ = 0;
  const double step_s = sample.draft_s + sample.feed_s + sample.verify_s;
  run_s_ += step_s;
  if (sample.drafted == 0) {
    ++plain_steps_;
    // Feeding without drafting (a ramp step waiting for the budget; a pause's or a probe's
    // requests between their drafted steps) is what plain decoding would not pay.
    if (ramp_waiting_ || mode_ == AutoMode::kPlain) explore_loss_s_ += sample.feed_s;
    ramp_waiting_ = false;
    return;
  }
  if (!pending_) return;
  pending_ = false;
  if (pending_explore_ && sample.requests > 0) {
    const int64_t committed = drafted_committed + (sample.requests - sample.drafted);
    explore_loss_s_ += step_s - double(committed) * PlainSecondsPerToken(sample.requests);
  }
  const double predicted = pending_expected_ - pending_n_;
  if (predicted > 0.01 * pending_n_) {
    // Slowly: the predictor's bias is a property of the predictor, while a step's committed
    // tokens vary with the acceptance draws (by about their mean). See Calibration().
    const double c = options_.calibration_smoothing;
    realized_extra_ = (1 - c) * realized_extra_ + c * double(drafted_committed - pending_n_);
    predicted_extra_ = (1 - c) * predicted_extra_ + c * predicted;
    calibration_prior_weight_ *= 1 - c;
  }
  if (ramp_ != Ramp::kDone) {
    if (measured.VerifyTimed()) AdvanceRamp(sample);
  } else if (pending_gain_ > 0) {
    // A probe's first step starts the gain afresh: what turned auto to plain was measured on
    // other requests (at low concurrency, on one request of its own acceptance).
    const bool probe = mode_ == AutoMode::kPlain;
    const bool fresh = gain_samples_ == 0 || (probe && probe_steps_ == 0);
    AddGainSample(pending_gain_, fresh);
    last_step_gain_ = pending_gain_;
    UpdateMode();
    // A probe that has not turned auto to speculation within probe_steps drafted steps ends:
    // its requests stop drafting and feeding until the next probe.
    if (probe && mode_ == AutoMode::kPlain && ++probe_steps_ >= options_.probe_steps) {
      EndFailedProbe(sample.drafted, sample.requests);
    }
  }
}

// Each ramp step's gain is judged on the fit as it stands after the step, with rows past the
// largest seen costing no more than it (their least possible cost: more rows never cost less),
// so a gain below 1 − margin means speculation does not pay even if those rows were free. Plain
// is chosen only after two ramp steps in a row say so (one slowed step must not decide), and
// only once D has been seen at two request counts (or for every request): one point cannot tell
// drafting's fixed cost from its per-request cost, and proportional extrapolation from one
// request would overstate the fleet's drafting where the fixed cost dominates (a GPU). g
// averages the ramp's gains (AddGainSample): at one request one draft's curve says little of
// the next one's.
void AutoBudget::AdvanceRamp(const StepSample& sample) {
  const int32_t requests = sample.requests;
  const int32_t n = sample.drafted;
  const double draft_s = n == requests ? sample.draft_s : 0.0;
  const double step_gain = FleetGain(ramp_curve_, requests, draft_s, PastSeen::kFree);
  AddGainSample(step_gain, /*fresh=*/gain_samples_ == 0);
  last_step_gain_ = step_gain;
  const bool draft_known = model_.draft().observed_bins() >= 2 || n == requests;
  ramp_losing_steps_ = draft_known && step_gain < 1 - options_.margin ? ramp_losing_steps_ + 1 : 0;
  if (ramp_losing_steps_ >= 2) {
    ramp_ = Ramp::kDone;
    SwitchToPlain(/*keep_contexts=*/CanKeepContexts(ramp_fed_, requests));
    return;
  }
  const bool slowed = LooksSlowed(sample);
  ramp_prev_rows_ = sample.rows;
  ramp_prev_verify_s_ = sample.verify_s;
  if (ramp_ == Ramp::kRequests) {
    // On to the rows at once where the first rows step (every fed request, two rows each) fits
    // the loss budget; otherwise more requests, anchors only, to measure drafting further.
    const int64_t rows_step = requests + ramp_fed_;
    if (2 * n >= ramp_fed_ || Affordable(ramp_fed_, rows_step, requests)) {
      ramp_ = Ramp::kRows;
    } else {
      ramp_drafted_ = NextRampRequests(n, requests);
    }
    return;
  }
  // kRows: climb while the fitted optimum is still at the largest rows seen. A step that would
  // stop the climb is taken again when its verify time breaks subadditivity (it was slowed by
  // other work: noise is one-sided): alone in the top bin it would otherwise stop the climb
  // below the knee for good, since no later step verifies there.
  const double calibration = Calibration();
  const double feed = model_.FeedSecondsPerRow();
  const double step_draft_s = model_.DraftSeconds(n);
  const auto seconds = [&](int64_t m) {
    const double fed_tokens = ExpectedTokens(ramp_curve_, m, 0, calibration);
    return std::max(1e-9, step_draft_s + feed * fed_tokens +
                              VerifySeconds(double(ramp_other_ + m), ramp_curve_.n + ramp_other_,
                                            ramp_curve_.CostAt(m)));
  };
  const int64_t best = BestRows(ramp_curve_, ramp_other_, calibration, seconds);
  const int64_t seen = RampRows(ramp_curve_.n);
  if (best >= seen && ramp_width_ < options_.width) {
    ramp_width_ *= 2;
    ramp_repeated_ = false;
  } else if (!ramp_repeated_ && slowed && ramp_losing_steps_ == 0) {
    ramp_repeated_ = true;  // same rows again: the top bin's lower sample decides
  } else {
    ramp_ = Ramp::kDone;
  }
}

// More rows never cost more than proportionally (subadditivity: k·x rows could run as k
// batches of x), so a verify time above that bound from the previous ramp step, with a
// tolerance for ordinary jitter, holds a slowdown from outside.
bool AutoBudget::LooksSlowed(const StepSample& sample) const {
  if (ramp_prev_rows_ == 0 || sample.rows <= ramp_prev_rows_) return false;
  constexpr double kJitter = 1.25;
  const double bound = ramp_prev_verify_s_ * double(sample.rows) / double(ramp_prev_rows_);
  return sample.verify_s > kJitter * bound;
}

// Doubling from n, as far as an anchors-only step drafting that many still fits the loss
// budget, staying below the fed requests (the rows step drafts them all). At least 2n.
int32_t AutoBudget::NextRampRequests(int32_t n, int32_t requests) const {
  int32_t next = 2 * n;
  while (2 * next < ramp_fed_ && Affordable(2 * next, requests, requests)) {
    next *= 2;
  }
  return next;
}

// Leaving speculation after it paid is a pause: the running requests keep their draft contexts
// and are probed like a probe's requests, so a stretch of hard drafts does not end speculation
// for good (a request can be fed again only from its admission: at one request, the rest of it
// would decode plainly). A pause whose probes fail ends as a failed probe does.
void AutoBudget::UpdateMode() {
  if (mode_ == AutoMode::kSpeculate && gain_ < 1 - options_.margin) {
    SwitchToPlain(/*keep_contexts=*/true);
  } else if (mode_ == AutoMode::kPlain && gain_ > 1 + options_.margin) {
    mode_ = AutoMode::kSpeculate;
  }
}

void AutoBudget::SwitchToPlain(bool keep_contexts) {
  mode_ = AutoMode::kPlain;
  detach_ = !keep_contexts;
  probe_steps_ = 0;  // a pause is probed from its first drafted step
  probe_draft_every_ = options_.probe_draft_every;
  plain_clock_ = 0;
  admissions_ = 0;
  probe_period_ = options_.probe_period;
}

void AutoBudget::EndFailedProbe(int32_t fed, int32_t requests) {
  probe_steps_ = 0;
  if (!CanKeepContexts(fed, requests)) {
    detach_ = true;
    return;
  }
  probe_draft_every_ = std::min(2 * probe_draft_every_, options_.max_probe_draft_every);
  plain_clock_ = 0;
}

AutoBudgetSnapshot AutoBudget::Snapshot() const {
  AutoBudgetSnapshot s{.mode = mode_,
                       .last_rows = last_rows_,
                       .last_best_rows = last_best_rows_,
                       .last_verify_predicted_s = last_verify_predicted_s_,
                       .last_tokens_predicted = last_tokens_predicted_,
                       .last_drafted = last_drafted_,
                       .gain = gain_samples_ > 0 ? gain_ : 0.0,
                       .step_gain = last_step_gain_,
                       .cold_start = ramp_ != Ramp::kDone,
                       .explore_loss_s = explore_loss_s_,
                       .explore_budget_s = last_requests_ > 0 && model_.verify().samples() > 0
                                               ? ExploreBudget(last_requests_)
                                               : 0.0,
                       .calibration = Calibration(),
                       .drafted_steps = drafted_steps_,
                       .plain_steps = plain_steps_,
                       .prompt_steps = prompt_steps_,
                       .feed_s_per_row = model_.FeedSecondsPerRow(),
                       .verify_fit = model_.verify().fit(),
                       .draft_fit = model_.draft().fit(),
                       .verify_bins = model_.verify().observed_bins(),
                       .verify_samples = model_.verify().samples(),
                       .verify_min_rows = model_.verify().min_observed_x(),
                       .verify_max_rows = model_.verify().max_observed_x()};
  if (experts_) {
    s.experts_priced = true;
    s.expert_sharing = experts_->sharing();
    s.expert_time_ratio = experts_->time_ratio();
    s.expert_row_s = experts_->row_seconds();
    const std::vector<double>& cost = experts_->row_costs();
    s.expert_own_rows = std::accumulate(cost.begin(), cost.end(), 0.0);
  }
  return s;
}

// The realized / predicted ratio of the steps so far (decayed alike), mixed with the prior 1
// by the weight the prior keeps: 1 before any step, (1 − c)^k after k. Both sums decay from
// zero, so the prior's weight does not depend on how many draft tokens the first steps
// predicted (a cold start's first steps verify one or two draft rows, and weighing the prior
// like the first step's prediction let a few early misses halve the calibration).
double AutoBudget::Calibration() const {
  if (predicted_extra_ <= 0) return 1.0;
  const double data_weight = 1 - calibration_prior_weight_;
  return std::clamp(data_weight * realized_extra_ / predicted_extra_ + calibration_prior_weight_,
                    0.25, 2.0);
}

// A fresh start averages its first samples equally, then smooths: an exponential average
// started at one sample would keep that sample's weight far beyond a's for several steps, and
// a probe is judged on its first probe_steps.
void AutoBudget::AddGainSample(double gain, bool fresh) {
  gain_samples_ = fresh ? 1 : gain_samples_ + 1;
  const double weight = std::max(options_.smoothing, 1.0 / double(gain_samples_));
  gain_ = (1 - weight) * gain_ + weight * gain;  // weight 1 at a fresh start
}

}  // namespace dscale::budget
