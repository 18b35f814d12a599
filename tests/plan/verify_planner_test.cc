#include "plan/verify_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/dvl_shapes.h"
#include "dvl/features.h"
#include "strategy_test_util.h"

namespace dscale {
namespace {

using plan_test::MakeBlocks;
using plan_test::MakeDrafts;
using plan_test::MakePredictor;

constexpr int32_t kW = dvl::kBlockWidth;

// Two packed batches agree row for row (tail included) and span for span (sentinels included).
void ExpectSameBatch(const StepBatch& got, const StepBatch& want) {
  ASSERT_EQ(got.rows(), want.rows());
  ASSERT_EQ(got.num_spans(), want.num_spans());
  EXPECT_TRUE(std::ranges::equal(got.token_storage(), want.token_storage()));
  EXPECT_TRUE(std::ranges::equal(got.position_storage(), want.position_storage()));
  EXPECT_TRUE(std::ranges::equal(got.kv_slot_storage(), want.kv_slot_storage()));
  EXPECT_TRUE(std::ranges::equal(got.owners(), want.owners()));
  EXPECT_TRUE(std::ranges::equal(got.logit_rows(), want.logit_rows()));
  ASSERT_EQ(got.span_storage().size(), want.span_storage().size());
  for (size_t i = 0; i < got.span_storage().size(); ++i) {
    const StepSpan &g = got.span_storage()[i], &w = want.span_storage()[i];
    EXPECT_EQ(g.q_start, w.q_start) << "span " << i;
    EXPECT_EQ(g.q_len, w.q_len) << "span " << i;
    EXPECT_EQ(g.ctx_len, w.ctx_len) << "span " << i;
    EXPECT_EQ(g.seq, w.seq) << "span " << i;
  }
}

// dscale's Decide + the planner's Pack against dvl::AllocateAndPack on the same predictor
// logits: the same k and the same rows.
TEST(VerifyPlannerTest, DScalePackEqualsAllocateAndPack) {
  const dvl::Predictor predictor = MakePredictor(9);
  for (const int32_t n : {1, 3, 6, 13}) {
    const StepBatch blocks = MakeBlocks(std::vector<int32_t>(n, kW));
    const DraftOutput drafts = MakeDrafts(n, 31 + n);
    PlannerConfig config{.policy = LengthPolicy{.mode = SpecMode::kDScale},
                         .block = kW,
                         .inputs = {.predictor = &predictor}};
    config.inputs.verify_budget.fraction = 0.4;
    VerifyPlanner planner = VerifyPlanner::Create(config).value();
    const StepBatch* planned = planner.Plan(blocks, drafts).value();

    std::vector<float> features(n * dvl::kFeatureCount), logits(n * dvl::kDraftPositions);
    dvl::ExtractFeaturesBatch(drafts.logits.data(), drafts.hidden.data(), n, n,
                              predictor.projections(), features.data());
    predictor.Forward(features.data(), n, logits.data());
    dvl::WorkspacePool pool(dvl::BucketConfig{.verify_budget = 0.4});
    dvl::BucketStep* want = pool.ForLiveCount(n).value();
    const int64_t budget = dvl::BudgetFromFraction(n, kW, 0.4).value();
    ASSERT_TRUE(dvl::AllocateAndPack(logits.data(), budget, blocks, want).ok());
    SCOPED_TRACE("n " + std::to_string(n));
    ExpectSameBatch(*planned, want->batch());
    if (n > 1) {  // the scores differ between requests, so the lengths do too
      EXPECT_FALSE(
          std::ranges::all_of(want->k().first(n), [&](int32_t k) { return k == want->k()[0]; }));
    }
  }
}

TEST(VerifyPlannerTest, PacksTheStrategysRows) {
  VerifyPlanner planner =
      VerifyPlanner::Create({.policy = LengthPolicy::Parse("fixed:3").value(), .block = kW})
          .value();
  const StepBatch blocks = MakeBlocks({kW, 1, kW});
  const std::vector<uint8_t> drafted = {1, 0, 1};
  const StepBatch* packed = planner.Plan(blocks, DraftOutput{}, drafted).value();
  ASSERT_EQ(packed->num_spans(), 3);
  EXPECT_EQ(packed->rows(), 3 + 1 + 3);
  EXPECT_EQ(packed->spans()[1].q_start, 3);
  EXPECT_EQ(packed->spans()[1].q_len, 1);
  EXPECT_EQ(packed->tokens()[4], 200);  // request 2's anchor
  EXPECT_TRUE(planner.FeedNewRequest());
  EXPECT_FALSE(planner.AutoSnapshot().has_value());
}

// Every policy verifies no row past a span cut where its request's output ends: dflash's whole
// block, fixed:K and dscale's allocation alike.
TEST(VerifyPlannerTest, NoPolicyVerifiesPastACutSpan) {
  const dvl::Predictor predictor = MakePredictor(6);
  const StepBatch blocks = MakeBlocks({kW, 3, kW, 1});
  const DraftOutput drafts = MakeDrafts(4, 41);
  for (const char* spec : {"dflash", "fixed:8", "dscale"}) {
    PlannerConfig config{.policy = LengthPolicy::Parse(spec).value(),
                         .block = kW,
                         .inputs = {.predictor = &predictor}};
    config.inputs.verify_budget.fraction = 0.9;  // more than the two whole blocks can use
    VerifyPlanner planner = VerifyPlanner::Create(config).value();
    const StepBatch* packed = planner.Plan(blocks, drafts).value();
    SCOPED_TRACE(spec);
    EXPECT_LE(packed->spans()[1].q_len, 3);
    EXPECT_EQ(packed->spans()[3].q_len, 1);
  }
}

TEST(VerifyPlannerTest, RefusesACapacityAboveTheBlock) {
  const Result<VerifyPlanner> planner =
      VerifyPlanner::Create({.policy = LengthPolicy::Parse("fixed:8").value(), .block = 4});
  ASSERT_FALSE(planner.ok());
  EXPECT_EQ(planner.status().message(), "--spec fixed:8: the drafter's block has only 4 rows");
}

}  // namespace
}  // namespace dscale
