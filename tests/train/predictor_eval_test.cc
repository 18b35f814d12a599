#include "train/predictor_eval.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace dscale::train {
namespace {

using dvl::kDraftPositions;

// Logits whose sigmoids are `p` at every position.
void AppendFlat(std::vector<float>& logits, double p) {
  logits.insert(logits.end(), kDraftPositions, static_cast<float>(std::log(p / (1.0 - p))));
}

TEST(PredictorEvalTest, RSquared) {
  EXPECT_DOUBLE_EQ(RSquared({1, 2, 3}, {1, 2, 3}), 1.0);
  EXPECT_DOUBLE_EQ(RSquared({2, 2, 2}, {1, 2, 3}), 0.0);  // the mean predicts nothing
  EXPECT_DOUBLE_EQ(RSquared({1, 2, 4}, {1, 2, 3}), 0.5);  // 1 − 1/2
  EXPECT_DOUBLE_EQ(RSquared({5, 5}, {5, 5}), 1.0);
  EXPECT_DOUBLE_EQ(RSquared({4, 5}, {5, 5}), 0.0);
}

TEST(PredictorEvalTest, RetentionAndWindowsByCohort) {
  // Cohort (step 0, N = 2): A has q = 0.88 (Σ 13.2, seed 13), B has q = 0.25 (Σ 3.75, seed 4).
  // Seeds total 17 against budget 16, so B (last-slot loss 0.25) shrinks to 3.
  // Cohort (step 1, N = 1): C has q = 0.5 (Σ 7.5, seed 8) against budget 8: unchanged.
  std::vector<float> logits;
  AppendFlat(logits, 0.88);
  AppendFlat(logits, 0.25);
  AppendFlat(logits, 0.5);
  const std::vector<TraceMeta> meta = {
      {.prompt_id = 1, .live_count = 2, .step = 0, .accepted = 15},
      {.prompt_id = 2, .live_count = 2, .step = 0, .accepted = 3},
      {.prompt_id = 3, .live_count = 1, .step = 1, .accepted = 4},
  };
  Result<EvalReport> r = EvaluateLogits(logits, meta, {0, 1, 2});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->records, 3);
  EXPECT_EQ(r->cohorts, 2);
  // Retained drafts: raw min(15,12) + min(3,3) + min(4,7) = 19; adjusted 12 + 2 + 4 = 18; of 22.
  EXPECT_NEAR(r->retention_raw, 19.0 / 22.0, 1e-12);
  EXPECT_NEAR(r->retention_adjusted, 18.0 / 22.0, 1e-12);
  EXPECT_NEAR(r->mean_window_raw, 25.0 / 3.0, 1e-12);
  EXPECT_NEAR(r->mean_window_adjusted, 8.0, 1e-12);
  EXPECT_NEAR(r->mean_accepted, 22.0 / 3.0, 1e-12);
  EXPECT_NEAR(r->r2, RSquared({13.2, 3.75, 7.5}, {15, 3, 4}), 1e-5);

  // Evaluating a subset re-forms the cohorts from the retained rows only.
  Result<EvalReport> only_b = EvaluateLogits({logits.begin() + 15, logits.begin() + 30}, meta, {1});
  ASSERT_TRUE(only_b.ok());
  EXPECT_EQ(only_b->cohorts, 1);
  EXPECT_NEAR(only_b->mean_window_adjusted, 8.0, 1e-12);  // budget 8 for one retained row
  EXPECT_NEAR(only_b->retention_adjusted, 1.0, 1e-12);

  EXPECT_FALSE(EvaluateLogits({}, meta, {}).ok());
}

TEST(PredictorEvalTest, RejectsPredictorForOtherProjections) {
  TraceSet traces;
  traces.header = {.drafter_hidden = 8, .drafter_vocab = 40, .projection_seed = 77};
  traces.meta = {{.prompt_id = 1, .live_count = 1, .step = 0, .accepted = 2}};
  traces.features.assign(dvl::kFeatureCount, 0.0f);
  const dvl::Predictor other(dvl::MakeProjections(8, 40, 78), dvl::PredictorWeights::Zeros());
  Result<EvalReport> r = EvaluatePredictor(other, traces, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("seed 78"), std::string::npos) << r.status().message();
  const dvl::Predictor same(dvl::MakeProjections(8, 40, 77), dvl::PredictorWeights::Zeros());
  EXPECT_TRUE(EvaluatePredictor(same, traces, {}).ok());
}

}  // namespace
}  // namespace dscale::train
