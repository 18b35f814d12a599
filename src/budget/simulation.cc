#include "budget/simulation.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/check.h"
#include "dvl/budget_allocator.h"
#include "dvl/budget_curve.h"
#include "dvl/deterministic_random.h"

namespace dscale::budget {
namespace {

// Common random numbers: every random draw comes from a stream keyed by what it belongs to, so
// two policies simulated with one seed serve the same requests (same acceptance, same accept
// draws in the order each request is drafted, same predictor noise) and see the same timing
// noise at the same step. Without this a comparison between policies measures mostly which
// requests each run happened to draw.
enum StreamKind : uint64_t {
  kRequestStream = 1,
  kPredictorStream = 2,
  kTimingStream = 3,
  kStretchStream = 4
};

dvl::DeterministicRandom Stream(uint64_t seed, StreamKind kind, uint64_t index) {
  return dvl::DeterministicRandom(
      dvl::SplitMix64Mix(dvl::SplitMix64Mix(seed ^ (kind << 56)) + index));
}

struct SimRequest {
  uint64_t index = 0;     // admission order
  double acceptance = 0;  // α_r
  int32_t produced = 0;
  bool fed = true;
  int32_t k = 0;                              // rows verified this step when drafted; 0 when not
  dvl::DeterministicRandom accept_rng{0};     // acceptance draws of this request
  dvl::DeterministicRandom predictor_rng{0};  // the predictor's noise on this request
};

class Loop {
 public:
  Loop(const SimulatedPair& pair, const SimulatedPolicy& policy, const SimulationOptions& options,
       AutoBudget* controller)
      : pair_(pair), policy_(policy), o_(options), auto_(controller) {
    DSCALE_CHECK(policy.kind != SimulatedPolicy::kAuto || controller != nullptr);
    for (int32_t i = 0; i < o_.concurrency && CanAdmit(); ++i) requests_.push_back(Admit());
  }

  SimulationResult Run() {
    SimulationResult result;
    double seconds = 0;
    int64_t tokens = 0;
    for (int64_t s = 0; s < o_.steps && !requests_.empty(); ++s) {
      const SimulatedStep step = Step(s);
      seconds += step.seconds;
      tokens += step.committed;
      result.steps.push_back(step);
    }
    result.tokens_per_second = seconds > 0 ? double(tokens) / seconds : 0;
    return result;
  }

 private:
  int32_t FixedRows() const { return std::clamp(policy_.rows, 1, o_.width); }

  bool CanAdmit() const { return o_.requests == 0 || admitted_ < o_.requests; }

  SimRequest Admit() {
    const uint64_t index = admitted_++;
    AddPromptOccupancy();
    SimRequest r{.index = index,
                 .fed = policy_.kind == SimulatedPolicy::kAuto
                            ? auto_->FeedNewRequest()
                            : policy_.kind != SimulatedPolicy::kPlain,
                 .accept_rng = Stream(o_.seed, kRequestStream, index),
                 .predictor_rng = Stream(o_.seed, kPredictorStream, index)};
    const double u = r.accept_rng.NextUniform();
    r.acceptance = pair_.acceptance_lo + u * (pair_.acceptance_hi - pair_.acceptance_lo);
    return r;
  }

  // A mixture of experts: an admitted request's prompt reports what its first m rows wake.
  void AddPromptOccupancy() {
    const SimulatedExperts& x = pair_.experts;
    if (x.experts == 0) return;
    for (int p = 0; p < ExpertOccupancy::kPoints; ++p) {
      const auto i = static_cast<size_t>(p);
      occupancy_.distinct[i] += x.Woken({ExpertOccupancy::kRows[i]});
      ++occupancy_.count[i];
    }
  }

  // The step's noise factors, drawn whether or not the step drafts: verify, draft, feed.
  struct StepNoise {
    double verify = 1, draft = 1, feed = 1;
  };
  StepNoise NoiseAt(int64_t step) const {
    dvl::DeterministicRandom rng = Stream(o_.seed, kTimingStream, static_cast<uint64_t>(step));
    const auto factor = [&] {
      double f = std::exp(pair_.noise * rng.NextNormal());
      if (rng.NextUniform() < pair_.outlier_share) f *= 3;
      return f;
    };
    StepNoise noise;
    noise.verify = factor();
    noise.draft = factor();
    noise.feed = factor();
    return noise;
  }

  // Request r's acceptance at its current token: α_r, or hard_acceptance in a hard stretch (or
  // in the text's opening, which the predictor does not see: `predicted`).
  double AcceptanceNow(const SimRequest& r, bool predicted = false) const {
    if (!predicted && r.produced < pair_.hard_opening_tokens) return pair_.hard_acceptance;
    if (pair_.hard_share <= 0) return r.acceptance;
    const auto stretch = static_cast<uint64_t>(r.produced / pair_.hard_stretch_tokens);
    dvl::DeterministicRandom rng = Stream(o_.seed, kStretchStream, (r.index << 24) + stretch);
    return rng.NextUniform() < pair_.hard_share ? pair_.hard_acceptance : r.acceptance;
  }

  // Drafts accepted by request r when verifying k rows: y with P(y ≥ j) = α^j, capped.
  int32_t Accepted(SimRequest& r, int32_t k) {
    const double acceptance = AcceptanceNow(r);
    int32_t y = 0;
    while (y < o_.width - 1 && r.accept_rng.NextUniform() < acceptance) ++y;
    return std::min(y, k - 1);
  }

  // Tokens request r may still commit (the engine's RequestState::tokens_left).
  int32_t TokensLeft(const SimRequest& r) const { return o_.tokens_per_request - r.produced; }

  // Predicted prefix scores [n, W] for the drafted requests, 0 past the tokens each may still
  // commit (the engine cuts a block there).
  void Predict(const std::vector<SimRequest*>& drafted) {
    const int w = o_.width;
    probs_.assign(drafted.size() * (w - 1), 0.0f);
    for (size_t i = 0; i < drafted.size(); ++i) {
      const double a =
          std::clamp(AcceptanceNow(*drafted[i], /*predicted=*/true) *
                         (1 + pair_.predictor_noise * drafted[i]->predictor_rng.NextNormal()),
                     0.0, 0.999);
      double p = 1;
      for (int j = 0; j < w - 1; ++j) probs_[i * (w - 1) + j] = static_cast<float>(p *= a);
    }
    q_.resize(drafted.size() * w);
    dvl::PrefixScoresFromProbs(probs_.data(), static_cast<int64_t>(drafted.size()), w, q_.data());
    for (size_t i = 0; i < drafted.size(); ++i) {
      for (int j = TokensLeft(*drafted[i]); j < w; ++j) q_[i * w + j] = 0.0f;
    }
  }

  int64_t ChooseRows(const std::vector<SimRequest*>& drafted, int64_t other, double draft_s) {
    const auto n = static_cast<int64_t>(drafted.size());
    if (policy_.kind == SimulatedPolicy::kFraction) {
      return dvl::BudgetFromFraction(n, o_.width, policy_.fraction).value();
    }
    if (policy_.kind == SimulatedPolicy::kFixed) return n * FixedRows();
    dvl::ExpectedTokensCurve(q_.data(), n, o_.width, &curve_, auto_->RowCosts());
    return auto_->ChooseRows(curve_, other, draft_s);
  }

  SimulatedStep Step(int64_t step_index) {
    const auto live = static_cast<int32_t>(requests_.size());
    const StepNoise noise = NoiseAt(step_index);
    SimulatedStep step{.mode = auto_ ? auto_->mode() : AutoMode::kSpeculate, .requests = live};
    // Drafted: the first n_draft fed requests with more than one token left (as the engine's
    // SelectDecoding); the other fed ones are fed but verify only their anchor, like the unfed.
    std::vector<SimRequest*> fed, draftable;
    for (SimRequest& r : requests_) {
      r.k = 0;
      if (r.fed) fed.push_back(&r);
      if (r.fed && TokensLeft(r) > 1) draftable.push_back(&r);
    }
    int32_t n_draft = policy_.kind == SimulatedPolicy::kPlain ? 0 : int32_t(draftable.size());
    if (n_draft > 0 && policy_.kind == SimulatedPolicy::kAuto) {
      n_draft = auto_->DraftCount(n_draft, live);
    }
    std::vector<SimRequest*> drafted(draftable.begin(), draftable.begin() + n_draft);
    const bool draft = n_draft > 0;
    double draft_s = 0;
    if (draft) {
      draft_s = noise.draft * pair_.draft_seconds(n_draft);
      Predict(drafted);
      const int64_t other = live - n_draft;
      const int64_t chosen = ChooseRows(drafted, other, draft_s);
      const std::vector<int32_t> drafted_k =
          policy_.kind == SimulatedPolicy::kFixed
              ? std::vector<int32_t>(n_draft, FixedRows())
              : dvl::Allocate(q_.data(), n_draft, o_.width, chosen).value().k;
      // No block reaches past the tokens its request may still commit (VerifyPlanner's clamp).
      for (int32_t i = 0; i < n_draft; ++i) {
        drafted[i]->k = std::min(drafted_k[i], TokensLeft(*drafted[i]));
        step.drafted_rows += drafted[i]->k;
      }
      step.drafted = n_draft;
    }
    step.rows = live - n_draft + step.drafted_rows;
    int64_t fed_rows = 0, drafted_committed = 0;
    for (SimRequest* r : fed) {
      const bool drafted_r = r->k > 0;
      const int32_t tokens = (drafted_r ? Accepted(*r, r->k) : 0) + 1;
      fed_rows += tokens;
      drafted_committed += drafted_r ? tokens : 0;
      r->produced += tokens;
    }
    step.committed = live - static_cast<int64_t>(fed.size()) + fed_rows;
    for (SimRequest& r : requests_) {
      if (!r.fed) ++r.produced;
    }
    const double feed_s = noise.feed * pair_.feed_seconds_per_row * double(fed_rows);
    const SimulatedExperts& x = pair_.experts;
    double experts = 0;
    if (x.experts > 0) {
      std::vector<int32_t> rows;  // [live]: the undrafted requests' anchors
      for (const SimRequest& r : requests_) rows.push_back(std::max(r.k, 1));
      experts = x.Woken(rows);
    }
    const double verify_s = noise.verify * (x.experts > 0 ? x.base_s + x.per_expert_s * experts +
                                                                x.per_row_s * double(step.rows)
                                                          : pair_.verify_seconds(step.rows));
    step.seconds = draft_s + feed_s + verify_s;
    if (policy_.kind == SimulatedPolicy::kAuto) {
      auto_->Record({.requests = live,
                     .drafted = step.drafted,
                     .rows = step.rows,
                     .fed_rows = fed_rows,
                     .draft_s = draft_s,
                     .feed_s = feed_s,
                     .verify_s = verify_s,
                     .experts = experts,
                     .occupancy = std::exchange(occupancy_, {})},
                    drafted_committed);
      if (auto_->TakeDetach()) {
        for (SimRequest& r : requests_) r.fed = false;
      }
    }
    Replace();
    return step;
  }

  // A finished request is replaced at once while requests remain to admit (all of them when
  // `requests` is 0), and dropped otherwise: a finite run ends with a shrinking batch.
  void Replace() {
    std::vector<SimRequest> next;
    for (SimRequest& r : requests_) {
      if (r.produced < o_.tokens_per_request) {
        next.push_back(std::move(r));
      } else if (CanAdmit()) {
        next.push_back(Admit());
      }
    }
    requests_ = std::move(next);
  }

  const SimulatedPair& pair_;
  SimulatedPolicy policy_;
  SimulationOptions o_;
  AutoBudget* auto_;
  int64_t admitted_ = 0;
  std::vector<SimRequest> requests_;
  std::vector<float> probs_, q_;
  dvl::BudgetCurve curve_;
  ExpertOccupancy occupancy_;  // since the last recorded step
};

}  // namespace

double SimulatedExperts::Woken(const std::vector<int32_t>& k) const {
  double independent = 0;
  for (const int32_t rows : k) independent += std::pow(double(rows), own_exponent);
  const double e = experts;
  return e * (1.0 - std::pow(1.0 - double(top_k) / e, std::pow(independent, anchor_exponent)));
}

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

SimulatedPair Cpu17BShapedPair() {
  return {.verify_seconds =
              [](int64_t r) { return std::max(85e-3 + 3e-3 * double(r), 11e-3 * double(r)); },
          .draft_seconds = [](int64_t n) { return 37e-3 * double(n); },
          .acceptance_lo = 0.3,
          .acceptance_hi = 0.7};
}

SimulatedPair Cpu17BRealisticPair() {
  return {.verify_seconds =
              [](int64_t r) { return std::max(171e-3 + 10e-3 * double(r), 30.9e-3 * double(r)); },
          .draft_seconds = [](int64_t n) { return 11e-3 + 100e-3 * double(n); },
          .acceptance_lo = 0.3,
          .acceptance_hi = 0.87};
}

SimulatedPair CpuZen5ShapedPair() {
  return {.verify_seconds = [](int64_t r) { return 81e-3 + 5.2e-3 * double(r); },
          .draft_seconds = [](int64_t n) { return 36e-3 * double(n); },
          .acceptance_lo = 0.6,
          .acceptance_hi = 0.9,
          .hard_share = 0.25,
          .hard_stretch_tokens = 16,
          .hard_acceptance = 0.1};
}

SimulatedPair CpuAvx2SubsetPair() {
  return {.verify_seconds =
              [](int64_t r) { return std::max(185e-3 + 16e-3 * double(r), 38e-3 * double(r)); },
          .draft_seconds = [](int64_t n) { return 65e-3 * double(n); },
          .acceptance_lo = 0.6,
          .acceptance_hi = 0.9,
          .hard_acceptance = 0.1,
          .hard_opening_tokens = 8,
          .predictor_noise = 0.4};
}

SimulatedPair CpuA3BShapedPair() {
  SimulatedPair pair = Cpu17BRealisticPair();
  pair.verify_seconds = nullptr;
  pair.draft_seconds = [](int64_t n) { return 20e-3 + 25e-3 * double(n); };
  pair.experts = {.experts = 128, .top_k = 8, .base_s = 30e-3, .per_expert_s = 4.2e-3};
  return pair;
}

namespace {

// CpuA3BShapedPair's target and acceptance on another CPU: drafting `draft_s` + `per_request_s`
// a request, and a verify step's times (SimulatedExperts' base_s, per_expert_s, per_row_s).
SimulatedPair CpuA3BOn(double draft_s, double per_request_s, SimulatedExperts times) {
  SimulatedPair pair = CpuA3BShapedPair();
  pair.draft_seconds = [=](int64_t n) { return draft_s + per_request_s * double(n); };
  pair.experts.base_s = times.base_s;
  pair.experts.per_expert_s = times.per_expert_s;
  pair.experts.per_row_s = times.per_row_s;
  return pair;
}

}  // namespace

SimulatedPair CpuA3BWithoutTilesPair() {
  return CpuA3BOn(10e-3, 12e-3, {.base_s = 50e-3, .per_expert_s = 2.7e-3, .per_row_s = 11e-3});
}

SimulatedPair CpuA3BAmxPair() {
  return CpuA3BOn(22e-3, 16e-3, {.base_s = 36e-3, .per_expert_s = 5.3e-3, .per_row_s = 0.5e-3});
}

SimulationResult Simulate(const SimulatedPair& pair, const SimulatedPolicy& policy,
                          const SimulationOptions& options, AutoBudget* controller) {
  DSCALE_CHECK(options.concurrency >= 1 && options.width >= 2 && options.tokens_per_request >= 1);
  Loop loop(pair, policy, options, policy.kind == SimulatedPolicy::kAuto ? controller : nullptr);
  return loop.Run();
}

}  // namespace dscale::budget
