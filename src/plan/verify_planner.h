#pragma once
// The decision stage of a decode step: how many rows k_i of each request's draft block are
// verified, and the flat-pack of those rows into the bucket's fixed-address workspace
// (paper Algorithm 1). The policy's LengthStrategy (length_strategy.h, one per --spec value)
// decides k; every policy goes through the same pack, so only k differs. The planner owns the
// bucket workspaces, sized for the policy's rows (LengthStrategy::CapacityFraction).
// DVL never sees acceptance random numbers: it reads only the drafts (and, for auto, timings).

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "budget/auto_budget.h"
#include "budget/step_cost_model.h"
#include "core/status.h"
#include "dvl/flat_pack.h"
#include "model/drafter.h"
#include "plan/length_strategy.h"
#include "plan/planner_config.h"

namespace dscale {

class VerifyPlanner {
 public:
  // dscale and dspark need the predictor and W = 16; dspark needs the SPS table.
  static Result<VerifyPlanner> Create(const PlannerConfig& config);

  // At admission: whether the new request's context is fed to the drafter (always, except for
  // auto while plain decoding pays better).
  bool FeedNewRequest() { return strategy_->FeedNewRequest(); }
  // Before drafting, with `fed` of the step's `requests` able to use a draft (a draft context
  // and more than one token left), and the rows of the prompt chunks riding in the step's verify
  // pass (mixed prefill; empty: none): how many of them this step drafts (the first ones in
  // batch order; all but auto: every fed one).
  int32_t DraftCount(int32_t fed, int32_t requests, std::span<const int32_t> prompt_chunks = {}) {
    return strategy_->DraftCount(fed, requests, prompt_chunks);
  }

  // Decides k for the n requests of `blocks` (one span per request: [anchor, candidates…] for a
  // drafted request, the anchor alone for the others) and packs them into the bucket's
  // StepBatch, ready for the target: the blocks' capture layers, the attention tile the packed
  // spans need. `drafted` [n] marks the requests that have drafts, whose rows in `drafts`
  // follow in request order (empty: all n). `draft_s`: seconds this step spent drafting. The
  // batch keeps its address for the planner's lifetime and its rows until the next call.
  Result<const StepBatch*> Plan(const StepBatch& blocks, const DraftOutput& drafts,
                                std::span<const uint8_t> drafted = {}, double draft_s = 0);

  // After the step (auto learns its step-cost model here; the other policies ignore it).
  void Record(const budget::StepSample& sample, int64_t drafted_committed) {
    strategy_->Record(sample, drafted_committed);
  }
  // True once after auto turned to plain decoding: running requests stop being fed.
  bool DropDraftContexts() { return strategy_->DropDraftContexts(); }
  // Whether the fed requests draft only at probes (auto decoding plainly): their committed rows
  // may wait on the host and join the draft context right before they next draft.
  bool HoldsDraftContexts() const { return strategy_->HoldsDraftContexts(); }
  // How many of a block's `candidates` the policy reads (LengthStrategy::CandidatesRead).
  int32_t CandidatesRead(int32_t candidates) const { return strategy_->CandidatesRead(candidates); }
  // auto's state, for /metrics and reports; nullopt for the other policies.
  std::optional<budget::AutoBudgetSnapshot> AutoSnapshot() const {
    return strategy_->AutoSnapshot();
  }

 private:
  VerifyPlanner(std::unique_ptr<LengthStrategy> strategy, dvl::BucketConfig config,
                bool tile_routing);

  std::unique_ptr<LengthStrategy> strategy_;
  dvl::WorkspacePool pool_;
  std::vector<int32_t> k_;  // [n] the latest step's lengths
  bool tile_routing_;
};

}  // namespace dscale
