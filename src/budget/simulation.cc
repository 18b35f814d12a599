#include "budget/simulation.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "dvl/budget_allocator.h"
#include "dvl/budget_curve.h"
#include "dvl/deterministic_random.h"

namespace dscale::budget {
namespace {

struct SimRequest {
  double acceptance = 0;
  int32_t produced = 0;
  bool fed = true;
};

class Loop {
 public:
  Loop(const SimulatedPair& pair, const SimulatedPolicy& policy, const SimulationOptions& options,
       AutoBudget* controller)
      : pair_(pair), policy_(policy), o_(options), auto_(controller), rng_(options.seed) {
    DSCALE_CHECK(policy.kind != SimulatedPolicy::kAuto || controller != nullptr);
    for (int32_t i = 0; i < o_.concurrency; ++i) requests_.push_back(Admit());
  }

  SimulationResult Run() {
    SimulationResult result;
    double seconds = 0;
    int64_t tokens = 0;
    for (int64_t s = 0; s < o_.steps; ++s) {
      const SimulatedStep step = Step();
      seconds += step.seconds;
      tokens += step.committed;
      result.steps.push_back(step);
    }
    result.tokens_per_second = seconds > 0 ? double(tokens) / seconds : 0;
    return result;
  }

 private:
  SimRequest Admit() {
    const double u = rng_.NextUniform();
    return {.acceptance = pair_.acceptance_lo + u * (pair_.acceptance_hi - pair_.acceptance_lo),
            .fed = policy_.kind == SimulatedPolicy::kAuto
                       ? auto_->FeedNewRequest()
                       : policy_.kind != SimulatedPolicy::kPlain};
  }

  double Noisy(double seconds) {
    double factor = std::exp(pair_.noise * rng_.NextNormal());
    if (rng_.NextUniform() < pair_.outlier_share) factor *= 3;
    return seconds * factor;
  }

  // Drafts accepted by request r when verifying k rows: y with P(y ≥ j) = α^j, capped.
  int32_t Accepted(const SimRequest& r, int32_t k) {
    int32_t y = 0;
    while (y < o_.width - 1 && rng_.NextUniform() < r.acceptance) ++y;
    return std::min(y, k - 1);
  }

  // Predicted prefix scores [n, W] for the drafted requests.
  void Predict(const std::vector<SimRequest*>& drafted) {
    const int w = o_.width;
    probs_.assign(drafted.size() * (w - 1), 0.0f);
    for (size_t i = 0; i < drafted.size(); ++i) {
      const double a = std::clamp(
          drafted[i]->acceptance * (1 + pair_.predictor_noise * rng_.NextNormal()), 0.0, 0.999);
      double p = 1;
      for (int j = 0; j < w - 1; ++j) probs_[i * (w - 1) + j] = static_cast<float>(p *= a);
    }
    q_.resize(drafted.size() * w);
    dvl::PrefixScoresFromProbs(probs_.data(), static_cast<int64_t>(drafted.size()), w, q_.data());
  }

  int64_t ChooseRows(const std::vector<SimRequest*>& drafted, int64_t other, double draft_s) {
    const auto n = static_cast<int64_t>(drafted.size());
    if (policy_.kind == SimulatedPolicy::kFraction) {
      return dvl::BudgetFromFraction(n, o_.width, policy_.fraction).value();
    }
    dvl::ExpectedTokensCurve(q_.data(), n, o_.width, &curve_);
    return auto_->ChooseRows(curve_, other, draft_s);
  }

  SimulatedStep Step() {
    SimulatedStep step{.mode = auto_ ? auto_->mode() : AutoMode::kSpeculate,
                       .requests = o_.concurrency};
    std::vector<SimRequest*> fed;
    for (SimRequest& r : requests_) {
      if (r.fed) fed.push_back(&r);
    }
    const auto n_fed = static_cast<int32_t>(fed.size());
    bool draft = n_fed > 0 && policy_.kind != SimulatedPolicy::kPlain;
    if (draft && policy_.kind == SimulatedPolicy::kAuto) draft = auto_->DraftThisStep(n_fed);
    std::vector<int32_t> k(fed.size(), 1);
    double draft_s = 0;
    if (draft) {
      draft_s = Noisy(pair_.draft_seconds(n_fed));
      Predict(fed);
      const int64_t other = o_.concurrency - n_fed;
      step.drafted_rows = ChooseRows(fed, other, draft_s);
      k = dvl::Allocate(q_.data(), n_fed, o_.width, step.drafted_rows).value().k;
      step.drafted = n_fed;
    }
    step.rows = o_.concurrency - n_fed + (draft ? step.drafted_rows : n_fed);
    int64_t fed_rows = 0, drafted_committed = 0;
    for (size_t i = 0; i < fed.size(); ++i) {
      const int32_t tokens = (draft ? Accepted(*fed[i], k[i]) : 0) + 1;
      fed_rows += tokens;
      drafted_committed += draft ? tokens : 0;
      fed[i]->produced += tokens;
    }
    step.committed = o_.concurrency - n_fed + fed_rows;
    for (SimRequest& r : requests_) {
      if (!r.fed) ++r.produced;
    }
    const double feed_s = Noisy(pair_.feed_seconds_per_row * double(fed_rows));
    const double verify_s = Noisy(pair_.verify_seconds(step.rows));
    step.seconds = draft_s + feed_s + verify_s;
    if (policy_.kind == SimulatedPolicy::kAuto) {
      auto_->Record({.requests = o_.concurrency,
                     .drafted = step.drafted,
                     .rows = step.rows,
                     .fed_rows = fed_rows,
                     .draft_s = draft_s,
                     .feed_s = feed_s,
                     .verify_s = verify_s},
                    drafted_committed);
      if (auto_->TakeDetach()) {
        for (SimRequest& r : requests_) r.fed = false;
      }
    }
    for (SimRequest& r : requests_) {
      if (r.produced >= o_.tokens_per_request) r = Admit();
    }
    return step;
  }

  const SimulatedPair& pair_;
  SimulatedPolicy policy_;
  SimulationOptions o_;
  AutoBudget* auto_;
  dvl::DeterministicRandom rng_;
  std::vector<SimRequest> requests_;
  std::vector<float> probs_, q_;
  dvl::BudgetCurve curve_;
};

}  // namespace

SimulatedPair GpuShapedPair(int64_t knee_rows) {
  return {
      .verify_seconds =
          [knee_rows](int64_t r) { return std::max(20e-3, 20e-3 * double(r) / double(knee_rows)); },
      .draft_seconds = [](int64_t n) { return 1.5e-3 + 5e-5 * double(n); }};
}

SimulatedPair CpuShapedPair() {
  return {.verify_seconds = [](int64_t r) { return 1.5e-3 + 0.35e-3 * double(r); },
          .draft_seconds = [](int64_t n) { return 0.5e-3 + 0.8e-3 * double(n); },
          .feed_seconds_per_row = 0.02e-3,
          .acceptance_lo = 0.3,
          .acceptance_hi = 0.7};
}

SimulationResult Simulate(const SimulatedPair& pair, const SimulatedPolicy& policy,
                          const SimulationOptions& options, AutoBudget* controller) {
  DSCALE_CHECK(options.concurrency >= 1 && options.width >= 2 && options.tokens_per_request >= 1);
  Loop loop(pair, policy, options, policy.kind == SimulatedPolicy::kAuto ? controller : nullptr);
  return loop.Run();
}

}  // namespace dscale::budget
