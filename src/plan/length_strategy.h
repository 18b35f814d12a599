#pragma once
// One length policy: how many rows k_i of each request's draft block a decode step verifies.
// Each --spec value has one implementation (MakeLengthStrategy picks it):
//   none                   PlainStrategy        k_i = 1 (the anchor)
//   dflash                 WholeBlockStrategy   k_i = the block's rows
//   fixed:K                FixedRowsStrategy    k_i = K (at most the block's rows)
//   dscale                 DScaleStrategy       Algorithm 1 at Σ k_i = verify_budget · W · N
//   dscale, budget auto    AutoBudgetStrategy   Algorithm 1 at the M budget/auto_budget.h picks
//   dspark                 DSparkStrategy       DSpark's walk over the predictor's scores
// A drafter with a Domino head drafts differently but is verified by the same policies, so the
// Domino variants have no strategy of their own.
//
// A strategy only decides; VerifyPlanner owns the bucket workspaces and packs the rows. Every k
// depends on the drafts (and, for auto, on timings) only, never on the acceptance randomness.

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>

#include "budget/auto_budget.h"
#include "budget/step_cost_model.h"
#include "core/status.h"
#include "core/step_batch.h"
#include "model/drafter.h"

namespace dscale {

// One decode step as the decision sees it.
struct StrategyInput {
  // One span per request, n in all: [anchor, candidates…] for a drafted request, the anchor
  // alone for the others.
  const StepBatch& blocks;
  // The drafted requests' candidates, in request order ([drafted_requests, W − 1] rows).
  const DraftOutput& drafts;
  // [n]: which requests have drafts; empty means all n.
  std::span<const uint8_t> drafted;
  int64_t drafted_requests = 0;  // how many of the n have drafts (n when `drafted` is empty)
  double draft_s = 0;            // seconds this step spent drafting
  // When the decision began (auto charges the decision's own time to the draft side).
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  int64_t requests() const { return blocks.num_spans(); }
};

class LengthStrategy {
 public:
  virtual ~LengthStrategy() = default;

  // The share of W · N_bs rows a bucket must hold for this policy's Σ k_i (W = `width`).
  virtual double CapacityFraction(int32_t width) const = 0;

  // Writes k [n] for the step's n requests. k arrives filled with 1 (the anchor alone); each
  // k_i must end in [1, W] with Σ k_i within CapacityFraction's share. A drafted span holds
  // fewer than W rows when the request's output ends within the block; the planner clamps k_i
  // to span i's rows, and the predictor's scores are 0 past it (plan/predictor_scores.h).
  virtual Status Decide(const StrategyInput& in, std::span<int32_t> k) = 0;

  // At admission: whether the new request's context is fed to the drafter.
  virtual bool FeedNewRequest() { return true; }
  // Before drafting, with `fed` of the step's `requests` able to use a draft (a draft context
  // and more than one token left), and the rows of the prompt chunks riding in the step's verify
  // pass: how many of them this step drafts (the first ones in batch order).
  virtual int32_t DraftCount(int32_t fed, int32_t /*requests*/,
                             std::span<const int32_t> /*prompt_chunks*/) {
    return fed;
  }
  // Before drafting: how many of a block's `candidates` (W − 1) the policy can read, from the
  // first; the drafter scores only those (DraftRequest::candidates). All of them for a policy
  // whose k, or whose features, depend on every candidate's draft logits.
  virtual int32_t CandidatesRead(int32_t candidates) const { return candidates; }
  // After the step: its timings and the tokens the drafted requests committed.
  virtual void Record(const budget::StepSample& /*sample*/, int64_t /*drafted_committed*/) {}
  // True once after the policy turned to plain decoding: running requests stop being fed.
  virtual bool DropDraftContexts() { return false; }
  // Whether the fed requests draft only at probes (VerifyPlanner::HoldsDraftContexts).
  virtual bool HoldsDraftContexts() const { return false; }
  // The auto budget's state, for /metrics and reports.
  virtual std::optional<budget::AutoBudgetSnapshot> AutoSnapshot() const { return std::nullopt; }
};

}  // namespace dscale
