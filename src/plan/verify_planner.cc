#include "plan/verify_planner.h"

#include <chrono>

#include "core/dvl_shapes.h"
#include "dvl/budget_allocator.h"
#include "dvl/features.h"

namespace dscale {
namespace {

// The pool's capacity must hold the policy's rows: fraction · W · N_bs ≥ Σ k_i.
double CapacityFraction(const PlannerConfig& c, int32_t width) {
  switch (c.policy.mode) {
    case SpecMode::kNone: return 1.0 / width;
    case SpecMode::kDFlash: return 1.0;
    case SpecMode::kFixed:
      return static_cast<double>(c.policy.fixed_rows) / width;
    case SpecMode::kDScale:
      return c.verify_budget.automatic ? 1.0 : c.verify_budget.fraction;
    case SpecMode::kDSpark:
      return 1.0;
  }
  return 1.0;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Result<VerifyPlanner> VerifyPlanner::Create(const PlannerConfig& planner) {
  const std::string spec = "--spec " + planner.policy.Name();
  if (planner.policy.UsesPredictor()) {
    if (planner.predictor == nullptr) return InvalidArgument(spec + " needs --predictor");
    if (planner.block != dvl::kBlockWidth) {
      return InvalidArgument(spec + " needs a drafter with block size " +
                             std::to_string(dvl::kBlockWidth) + ", got " +
                             std::to_string(planner.block));
    }
  }
  if (planner.policy.mode == SpecMode::kDSpark && planner.sps_table == nullptr) {
    return InvalidArgument(spec +
                           " needs a steps-per-second table (profiled at start-up, or "
                           "--sps-table FILE)");
  }
  if (planner.max_running < 1) return InvalidArgument("max_running: must be at least 1");
  dvl::BucketConfig config;
  config.width = std::max(planner.block, 2);
  config.verify_budget = CapacityFraction(planner, config.width);
  if (Status s = config.Validate(); !s.ok()) return s.WithContext("--verify-budget");
  return VerifyPlanner(planner, std::move(config));
}

VerifyPlanner::VerifyPlanner(PlannerConfig planner, dvl::BucketConfig config)
    : planner_(planner), config_(config), pool_(std::move(config)) {
  if (planner_.policy.mode == SpecMode::kDScale && planner_.verify_budget.automatic) {
    auto_.emplace(
        budget::AutoBudgetOptions{.width = config_.width, .max_requests = planner_.max_running});
  }
}

bool VerifyPlanner::FeedNewRequest() { return auto_ ? auto_->FeedNewRequest() : true; }

int32_t VerifyPlanner::DraftCount(int32_t fed, int32_t requests) {
  return auto_ ? auto_->DraftCount(fed, requests) : fed;
}

Result<StepBatch*> VerifyPlanner::Plan(const StepBatch& blocks, const DraftOutput& drafts,
                                       std::span<const uint8_t> drafted, double draft_s) {
  const auto start = std::chrono::steady_clock::now();
  DSCALE_ASSIGN_OR_RETURN(dvl::BucketStep * bucket, pool_.ForLiveCount(blocks.num_spans()));
  const SpecMode mode = planner_.policy.mode;
  if (mode == SpecMode::kDScale && !auto_) {
    DSCALE_RETURN_IF_ERROR(DecideWithPredictor(blocks, drafts, bucket));
    return &bucket->batch();
  }
  const int64_t n = blocks.num_spans();
  int64_t rows = n;  // requests with drafts
  if (!drafted.empty()) {
    DSCALE_CHECK(static_cast<int64_t>(drafted.size()) == n);
    rows = 0;
    for (uint8_t d : drafted) rows += d;
  }
  k_.assign(n, 1);
  if (auto_) {
    if (rows > 0) {
      Score(drafts, rows, n);
      const double spent =
          planner_.planted ? planner_.planted->draft_seconds(rows) : draft_s + SecondsSince(start);
      DecideAuto(drafted, n, rows, spent);
    }
  } else if (mode == SpecMode::kDSpark) {
    DSCALE_CHECK(rows == n);
    Score(drafts, n, n);
    const budget::SpsTable& sps = *planner_.sps_table;
    budget::DSparkWalk(
        q_.data(), n, config_.width, [&sps](int64_t b) { return sps.StepsPerSecond(b); }, &dspark_,
        k_.data());
  } else if (mode != SpecMode::kNone) {
    // A request without drafts has its anchor row only.
    const int32_t rows = planner_.policy.UniformRows(config_.width);
    for (int64_t i = 0; i < n; ++i) k_[i] = std::min(rows, blocks.spans()[i].q_len);
  }
  DSCALE_RETURN_IF_ERROR(dvl::Pack(blocks, k_, bucket));
  return &bucket->batch();
}

void VerifyPlanner::Score(const DraftOutput& drafts, int64_t rows, int64_t live_count) {
  DSCALE_CHECK(drafts.candidates == dvl::kDraftPositions);
  features_.resize(rows * dvl::kFeatureCount);
  pred_logits_.resize(rows * dvl::kDraftPositions);
  q_.resize(rows * dvl::kBlockWidth);
  dvl::ExtractFeaturesBatch(drafts.logits.data(), drafts.hidden.data(), rows, live_count,
                            planner_.predictor->projections(), features_.data());
  planner_.predictor->Forward(features_.data(), rows, pred_logits_.data());
  dvl::PrefixScoresFromLogits(pred_logits_.data(), rows, dvl::kBlockWidth, q_.data());
}

void VerifyPlanner::DecideAuto(std::span<const uint8_t> drafted, int64_t n, int64_t rows,
                               double draft_s) {
  dvl::ExpectedTokensCurve(q_.data(), rows, dvl::kBlockWidth, &curve_);
  const int64_t m = auto_->ChooseRows(curve_, n - rows, draft_s);
  drafted_k_.resize(rows);
  seed_.resize(rows);
  offsets_.resize(rows + 1);
  dvl::AllocateInto(q_.data(), rows, dvl::kBlockWidth, m, seed_.data(), drafted_k_.data(),
                    offsets_.data());
  for (int64_t i = 0, d = 0; i < n; ++i) {
    if (drafted.empty() || drafted[i]) k_[i] = drafted_k_[d++];
  }
}

Status VerifyPlanner::DecideWithPredictor(const StepBatch& blocks, const DraftOutput& drafts,
                                          dvl::BucketStep* bucket) {
  const int64_t n = blocks.num_spans();
  DSCALE_CHECK(drafts.candidates == dvl::kDraftPositions);
  features_.resize(n * dvl::kFeatureCount);
  pred_logits_.resize(n * dvl::kDraftPositions);
  dvl::ExtractFeaturesBatch(drafts.logits.data(), drafts.hidden.data(), n, /*live_count=*/n,
                            planner_.predictor->projections(), features_.data());
  planner_.predictor->Forward(features_.data(), n, pred_logits_.data());
  DSCALE_ASSIGN_OR_RETURN(
      const int64_t budget,
      dvl::BudgetFromFraction(n, config_.width, planner_.verify_budget.fraction));
  return dvl::AllocateAndPack(pred_logits_.data(), budget, blocks, bucket).status();
}

void VerifyPlanner::Record(const budget::StepSample& sample, int64_t drafted_committed) {
  if (!auto_) return;
  budget::StepSample s = sample;
  if (const budget::SimulatedPair* p = planner_.planted) {
    s.draft_s = s.drafted > 0 ? p->draft_seconds(s.drafted) : 0.0;
    s.feed_s = p->feed_seconds_per_row * double(s.fed_rows);
    s.verify_s = p->verify_seconds(s.rows);
  }
  auto_->Record(s, drafted_committed);
}

std::optional<budget::AutoBudgetSnapshot> VerifyPlanner::AutoSnapshot() const {
  if (!auto_) return std::nullopt;
  return auto_->Snapshot();
}

}  // namespace dscale
