#include "plan/verify_planner.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/check.h"
#include "plan/make_length_strategy.h"

namespace dscale {
namespace {

// How many of the n requests have drafts.
int64_t DraftedRequests(std::span<const uint8_t> drafted, int64_t n) {
  if (drafted.empty()) return n;
  DSCALE_CHECK(static_cast<int64_t>(drafted.size()) == n);
  int64_t rows = 0;
  for (uint8_t d : drafted) rows += d;
  return rows;
}

// A policy's k_i may reach past a span cut short where the request's output ends (Algorithm 1
// grows into rows scored 0 once every scored row is taken); those rows could commit nothing.
void ClampToSpans(const StepBatch& blocks, std::span<int32_t> k) {
  const std::span<const StepSpan> spans = blocks.spans();
  for (size_t i = 0; i < k.size(); ++i) k[i] = std::min(k[i], spans[i].q_len);
}

}  // namespace

Result<VerifyPlanner> VerifyPlanner::Create(const PlannerConfig& planner) {
  DSCALE_ASSIGN_OR_RETURN(std::unique_ptr<LengthStrategy> strategy, MakeLengthStrategy(planner));
  dvl::BucketConfig config;
  config.width = PlanWidth(planner);
  config.verify_budget = strategy->CapacityFraction(config.width);
  if (Status s = config.Validate(); !s.ok()) return s.WithContext("--verify-budget");
  return VerifyPlanner(std::move(strategy), std::move(config), planner.tile_routing);
}

VerifyPlanner::VerifyPlanner(std::unique_ptr<LengthStrategy> strategy, dvl::BucketConfig config,
                             bool tile_routing)
    : strategy_(std::move(strategy)), pool_(std::move(config)), tile_routing_(tile_routing) {}

// Every policy's k goes through the same pack: dvl::AllocateAndPack is PrefixScoresFromLogits,
// AllocateInto and Pack of the k it allocates, so DScaleStrategy's AllocateInto followed by
// this Pack gives the same k and the same rows. (The bucket's scores() and seed() stay unset
// here: nothing reads them from the planner's workspaces.)
Result<const StepBatch*> VerifyPlanner::Plan(const StepBatch& blocks, const DraftOutput& drafts,
                                             std::span<const uint8_t> drafted, double draft_s) {
  const auto started = std::chrono::steady_clock::now();
  DSCALE_ASSIGN_OR_RETURN(dvl::BucketStep * bucket, pool_.ForLiveCount(blocks.num_spans()));
  const int64_t n = blocks.num_spans();
  const StrategyInput in{.blocks = blocks,
                         .drafts = drafts,
                         .drafted = drafted,
                         .drafted_requests = DraftedRequests(drafted, n),
                         .draft_s = draft_s,
                         .started = started};
  k_.assign(n, 1);
  DSCALE_RETURN_IF_ERROR(strategy_->Decide(in, k_));
  ClampToSpans(blocks, k_);
  DSCALE_RETURN_IF_ERROR(dvl::Pack(blocks, k_, bucket));
  StepBatch& packed = bucket->batch();
  packed.capture_layers = blocks.capture_layers;
  packed.tile_rows = TileRowsFor(packed.MaxQueryLen(), tile_routing_);
  return &packed;
}

}  // namespace dscale
