#pragma once
// The decision stage of a decode step: how many rows k_i of each request's draft block are
// verified, and the flat-pack of those rows into the bucket's fixed-address workspace
// (paper Algorithm 1). Every length policy goes through the same pack; only k differs:
//   none / dflash / fixed:K   k_i = 1 / W / K for every request
//   dscale                    features → predictor → prefix scores → seeds → budget
//                             adjustment to Σ k_i = verify_budget · W · N (W·N/2 by default)
//   dscale, budget auto       the same, with Σ k_i chosen per step by budget/auto_budget.h from
//                             the expected-token curve and the step-cost model; it also decides
//                             which requests keep a draft context and which steps draft
//   dspark                    DSpark's walk (budget/dspark_walk.h) over the same prefix scores
//                             and a steps-per-second table
// DVL never sees acceptance random numbers: it reads only the drafts (and, for auto, timings).

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "budget/auto_budget.h"
#include "budget/dspark_walk.h"
#include "budget/simulation.h"
#include "budget/sps_table.h"
#include "budget/verify_budget.h"
#include "core/status.h"
#include "dvl/budget_curve.h"
#include "dvl/flat_pack.h"
#include "dvl/predictor.h"
#include "model/drafter.h"
#include "spec/length_policy.h"

namespace dscale {

struct PlannerConfig {
  LengthPolicy policy;
  int32_t block = 1;                               // W (1 without a drafter)
  const dvl::Predictor* predictor = nullptr;       // dscale, dspark; must outlive the planner
  budget::VerifyBudget verify_budget;              // dscale
  const budget::SpsTable* sps_table = nullptr;     // dspark; must outlive the planner
  const budget::SimulatedPair* planted = nullptr;  // auto learns these times (tests)
  int32_t max_running = 16;                        // N at most (auto's cost-model range)
};

class VerifyPlanner {
 public:
  // dscale and dspark need the predictor and W = 16; dspark needs the SPS table.
  static Result<VerifyPlanner> Create(const PlannerConfig& config);

  // At admission: whether the new request's context is fed to the drafter (always, except for
  // auto while plain decoding pays better).
  bool FeedNewRequest();
  // Before drafting, with `fed` of the step's `requests` holding a draft context: how many of
  // them this step drafts (the first ones in batch order; all but auto: every fed one).
  int32_t DraftCount(int32_t fed, int32_t requests);

  // Decides k for the n requests of `blocks` (one span per request: [anchor, candidates…] for a
  // drafted request, the anchor alone for the others) and packs them into the bucket's
  // StepBatch. `drafted` [n] marks the requests that have drafts, whose rows in `drafts` follow
  // in request order (empty: all n). `draft_s`: seconds this step spent drafting. The batch
  // keeps its address for the planner's lifetime and its rows until the next call.
  Result<StepBatch*> Plan(const StepBatch& blocks, const DraftOutput& drafts,
                          std::span<const uint8_t> drafted = {}, double draft_s = 0);

  // After the step (auto learns its step-cost model here; the other policies ignore it).
  void Record(const budget::StepSample& sample, int64_t drafted_committed);
  // True once after auto turned to plain decoding: running requests stop being fed.
  bool DropDraftContexts() { return auto_ && auto_->TakeDetach(); }
  // auto's state, for /metrics and reports; nullopt for the other policies.
  std::optional<budget::AutoBudgetSnapshot> AutoSnapshot() const;

 private:
  VerifyPlanner(PlannerConfig planner, dvl::BucketConfig config);
  Status DecideWithPredictor(const StepBatch& blocks, const DraftOutput& drafts,
                             dvl::BucketStep* bucket);
  // Prefix scores q_ [rows, W] of the first `rows` requests of `drafts`.
  void Score(const DraftOutput& drafts, int64_t rows, int64_t live_count);
  // auto: k_ for the drafted requests (the others keep 1).
  void DecideAuto(std::span<const uint8_t> drafted, int64_t n, int64_t rows, double draft_s);

  PlannerConfig planner_;
  dvl::BucketConfig config_;
  std::optional<budget::AutoBudget> auto_;
  dvl::WorkspacePool pool_;
  std::vector<int32_t> k_;
  std::vector<float> features_;     // [rows, 1735]
  std::vector<float> pred_logits_;  // [rows, 15]
  std::vector<float> q_;            // [rows, 16]
  std::vector<int32_t> drafted_k_, seed_, offsets_;
  dvl::BudgetCurve curve_;
  budget::DSparkScratch dspark_;
};

}  // namespace dscale
