#include "engine/verify_planner.h"

#include "dvl/budget_allocator.h"
#include "dvl/dvl_shapes.h"
#include "dvl/features.h"

namespace dscale {
namespace {

// The pool's capacity must hold the policy's rows: fraction · W · N_bs ≥ Σ k_i.
double CapacityFraction(const LengthPolicy& policy, int32_t width, double verify_budget) {
  switch (policy.mode) {
    case SpecMode::kNone: return 1.0 / width;
    case SpecMode::kDFlash: return 1.0;
    case SpecMode::kFixed: return static_cast<double>(policy.fixed_rows) / width;
    case SpecMode::kDScale: return verify_budget;
  }
  return 1.0;
}

}  // namespace

Result<VerifyPlanner> VerifyPlanner::Create(const LengthPolicy& policy, int32_t block,
                                            const dvl::Predictor* predictor,
                                            double verify_budget) {
  if (policy.mode == SpecMode::kDScale) {
    if (predictor == nullptr) return InvalidArgument("--spec dscale needs --predictor");
    if (block != dvl::kBlockWidth) {
      return InvalidArgument("--spec dscale needs a drafter with block size " +
                             std::to_string(dvl::kBlockWidth) + ", got " + std::to_string(block));
    }
  }
  dvl::BucketConfig config;
  config.width = std::max(block, 2);
  config.verify_budget = CapacityFraction(policy, config.width, verify_budget);
  if (Status s = config.Validate(); !s.ok()) return s.WithContext("--verify-budget");
  return VerifyPlanner(policy, std::move(config), predictor);
}

VerifyPlanner::VerifyPlanner(LengthPolicy policy, dvl::BucketConfig config,
                             const dvl::Predictor* predictor)
    : policy_(policy), config_(config), predictor_(predictor), pool_(std::move(config)) {}

Result<const dvl::PackWorkspace*> VerifyPlanner::Plan(const DraftBlocks& blocks,
                                                      const DraftOutput& drafts) {
  DSCALE_ASSIGN_OR_RETURN(dvl::PackWorkspace * ws, pool_.ForLiveCount(blocks.n));
  const dvl::PackInput in{.n = blocks.n,
                          .width = config_.width,
                          .tokens = blocks.tokens,
                          .positions = blocks.positions,
                          .kv_slots = blocks.kv_slots,
                          .k = {}};
  if (policy_.mode == SpecMode::kDScale) {
    DSCALE_RETURN_IF_ERROR(DecideWithPredictor(blocks, drafts, ws));
    return ws;
  }
  k_.assign(blocks.n, policy_.mode == SpecMode::kNone ? 1 : policy_.UniformRows(config_.width));
  dvl::PackInput uniform = in;
  uniform.k = k_;
  DSCALE_RETURN_IF_ERROR(dvl::Pack(uniform, ws));
  return ws;
}

Status VerifyPlanner::DecideWithPredictor(const DraftBlocks& blocks, const DraftOutput& drafts,
                                          dvl::PackWorkspace* ws) {
  const int64_t n = blocks.n;
  DSCALE_CHECK(drafts.width == dvl::kDraftPositions);
  features_.resize(n * dvl::kFeatureCount);
  pred_logits_.resize(n * dvl::kDraftPositions);
  dvl::ExtractFeaturesBatch(drafts.logits.data(), drafts.hidden.data(), n, /*live_count=*/n,
                            predictor_->projections(), features_.data());
  predictor_->Forward(features_.data(), n, pred_logits_.data());
  DSCALE_ASSIGN_OR_RETURN(const int64_t budget,
                          dvl::BudgetFromFraction(n, config_.width, config_.verify_budget));
  const dvl::PackInput in{.n = n,
                          .width = config_.width,
                          .tokens = blocks.tokens,
                          .positions = blocks.positions,
                          .kv_slots = blocks.kv_slots,
                          .k = {}};
  return dvl::AllocateAndPack(pred_logits_.data(), budget, in, ws).status();
}

}  // namespace dscale
