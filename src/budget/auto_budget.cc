#include "budget/auto_budget.h"

#include <algorithm>
#include <cmath>

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
      probe_period_(options_.probe_period) {
  DSCALE_CHECK(options_.width >= 2 && options_.max_requests >= 1);
  DSCALE_CHECK(options_.explore_every >= 1 && options_.probe_draft_every >= 1);
  DSCALE_CHECK(options_.probe_period >= 1 && options_.smoothing > 0 && options_.smoothing <= 1);
}

bool AutoBudget::FeedNewRequest() {
  if (mode_ == AutoMode::kSpeculate) return true;
  if (++admissions_ < probe_period_) return false;
  admissions_ = 0;
  probe_period_ = std::min(2 * probe_period_, options_.max_probe_period);
  return true;
}

bool AutoBudget::DraftThisStep(int32_t fed) {
  if (fed == 0) return false;
  if (mode_ == AutoMode::kSpeculate) return true;
  return ++plain_clock_ % options_.probe_draft_every == 0;
}

double AutoBudget::FleetGain(const dvl::BudgetCurve& curve, int64_t total, double draft_s) const {
  const double n = static_cast<double>(curve.n);
  const double scale = static_cast<double>(total) / n;
  const double calibration = Calibration();
  const double feed = model_.FeedSecondsPerRow();
  const double draft = curve.n == total ? draft_s : model_.DraftSeconds(static_cast<double>(total));
  double best_rate = 0;
  for (int64_t m = curve.min_rows(); m <= curve.max_rows(); ++m) {
    const double tokens = scale * ExpectedTokens(curve, m, 0, calibration);
    const double seconds = draft + feed * tokens + model_.VerifySeconds(scale * m);
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
    return std::max(1e-9, draft_s + feed * fed_tokens + model_.VerifySeconds(other + m));
  };
  const int64_t best = BestRows(curve, other, calibration, seconds);
  int64_t rows = best;
  pending_gain_ = 0;
  if (cold_done_ < options_.cold_fractions.size()) {
    const double f = options_.cold_fractions[cold_done_++];
    rows = std::clamp<int64_t>(std::llround(f * curve.max_rows()), n, curve.max_rows());
  } else {
    pending_gain_ = FleetGain(curve, n + other, draft_s);
    if ((drafted_steps_ + 1) % options_.explore_every == 0) rows = ExploreRows(best, n);
  }
  ++drafted_steps_;
  pending_ = true;
  pending_n_ = static_cast<int32_t>(n);
  pending_expected_ = curve.At(rows);
  last_rows_ = rows;
  last_drafted_ = static_cast<int32_t>(n);
  return rows;
}

void AutoBudget::Record(const StepSample& sample, int64_t drafted_committed) {
  model_.Add(sample);
  if (sample.drafted == 0) {
    ++plain_steps_;
    return;
  }
  if (!pending_) return;
  pending_ = false;
  const double a = options_.smoothing;
  const double predicted = pending_expected_ - pending_n_;
  if (predicted > 0.01 * pending_n_) {
    realized_extra_ = (1 - a) * realized_extra_ + a * double(drafted_committed - pending_n_);
    predicted_extra_ = (1 - a) * predicted_extra_ + a * predicted;
  }
  if (pending_gain_ > 0) {
    gain_ = gain_set_ ? (1 - a) * gain_ + a * pending_gain_ : pending_gain_;
    gain_set_ = true;
    UpdateMode();
  }
}

void AutoBudget::UpdateMode() {
  if (mode_ == AutoMode::kSpeculate && gain_ < 1 - options_.margin) {
    mode_ = AutoMode::kPlain;
    detach_ = true;
    admissions_ = 0;
    probe_period_ = options_.probe_period;
  } else if (mode_ == AutoMode::kPlain && gain_ > 1 + options_.margin) {
    mode_ = AutoMode::kSpeculate;
  }
}

AutoBudgetSnapshot AutoBudget::Snapshot() const {
  AutoBudgetSnapshot s{.mode = mode_,
                       .last_rows = last_rows_,
                       .last_drafted = last_drafted_,
                       .gain = gain_set_ ? gain_ : 0.0,
                       .calibration = Calibration(),
                       .drafted_steps = drafted_steps_,
                       .plain_steps = plain_steps_,
                       .feed_s_per_row = model_.FeedSecondsPerRow(),
                       .verify_fit = model_.verify().fit(),
                       .draft_fit = model_.draft().fit(),
                       .verify_bins = model_.verify().observed_bins(),
                       .verify_samples = model_.verify().samples(),
                       .verify_min_rows = model_.verify().min_observed_x(),
                       .verify_max_rows = model_.verify().max_observed_x()};
  return s;
}

double AutoBudget::Calibration() const {
  if (predicted_extra_ <= 0) return 1.0;
  return std::clamp(realized_extra_ / predicted_extra_, 0.25, 2.0);
}

}  // namespace dscale::budget
