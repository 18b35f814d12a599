#include "train/predictor_trainer.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <set>
#include <vector>

#include "dvl/features.h"
#include "synthetic_traces.h"
#include "train/predictor_eval.h"

namespace dscale::train {
namespace {

using dvl::kDraftPositions;

TEST(PredictorTrainerTest, LossGradientMatchesFiniteDifferences) {
  std::array<float, kDraftPositions> z;
  for (int j = 0; j < kDraftPositions; ++j) z[j] = 0.7f * std::sin(1.3f * j) + 0.2f * j - 1.0f;
  for (uint32_t y : {0u, 4u, 15u}) {
    std::array<float, kDraftPositions> grad;
    RecordLoss(z.data(), y, 0.02f, grad.data());
    for (int j = 0; j < kDraftPositions; ++j) {
      std::array<float, kDraftPositions> plus = z;
      std::array<float, kDraftPositions> minus = z;
      plus[j] += 1e-2f;
      minus[j] -= 1e-2f;
      std::array<float, kDraftPositions> unused;
      const double numeric = (RecordLoss(plus.data(), y, 0.02f, unused.data()) -
                              RecordLoss(minus.data(), y, 0.02f, unused.data())) /
                             2e-2;
      EXPECT_NEAR(grad[j], numeric, 1e-4) << "y " << y << " position " << j;
    }
  }
}

TEST(PredictorTrainerTest, LossIsBceMeanPlusWeightedCountError) {
  const std::array<float, kDraftPositions> z{};  // σ = 0.5 everywhere, Σσ = 7.5
  std::array<float, kDraftPositions> grad;
  const double loss = RecordLoss(z.data(), 3, 0.02f, grad.data());
  EXPECT_NEAR(loss, std::log(2.0) + 0.02 * 4.5 * 4.5, 1e-6);
  // Position 1 is labelled 1 (3 ≥ 1), position 4 is labelled 0 (3 < 4).
  EXPECT_NEAR(grad[0], -0.5 / 15 + 2 * 0.02 * 4.5 * 0.25, 1e-6);
  EXPECT_NEAR(grad[3], 0.5 / 15 + 2 * 0.02 * 4.5 * 0.25, 1e-6);
}

TEST(PredictorTrainerTest, SplitIsPromptDisjointAndDeterministic) {
  const TraceSet set = testing::SyntheticTraces(3000, 5);  // 200 prompts
  const Split a = SplitByPrompt(set.meta, 9, 0.1).value();
  const Split b = SplitByPrompt(set.meta, 9, 0.1).value();
  EXPECT_EQ(a.holdout, b.holdout);
  std::set<uint32_t> train_ids;
  std::set<uint32_t> holdout_ids;
  for (size_t r : a.train) train_ids.insert(set.meta[r].prompt_id);
  for (size_t r : a.holdout) holdout_ids.insert(set.meta[r].prompt_id);
  for (uint32_t id : holdout_ids) EXPECT_EQ(train_ids.count(id), 0u) << "prompt " << id;
  EXPECT_EQ(a.train.size() + a.holdout.size(), set.size());
  EXPECT_EQ(static_cast<int64_t>(holdout_ids.size()), a.holdout_prompts);
  EXPECT_GT(a.holdout_prompts, 8);  // ≈ 20 of 200
  EXPECT_LT(a.holdout_prompts, 36);
  EXPECT_NE(SplitByPrompt(set.meta, 10, 0.1).value().holdout, a.holdout);

  // Two prompts always give a nonempty side each; one prompt is an error.
  const TraceSet two = testing::SyntheticTraces(30, 5);
  const Split s = SplitByPrompt(two.meta, 1, 0.1).value();
  EXPECT_EQ(s.holdout_prompts, 1);
  EXPECT_EQ(s.train_prompts, 1);
  EXPECT_FALSE(SplitByPrompt(testing::SyntheticTraces(15, 5).meta, 1, 0.1).ok());
}

TEST(PredictorTrainerTest, LearnsAcceptedCountFromTheSignalFeature) {
  const TraceSet set = testing::SyntheticTraces(2000, 6);
  TrainerConfig config;
  config.max_epochs = 12;
  config.batch_size = 64;
  config.learning_rate = 3e-3f;
  config.seed = 3;
  int epochs_seen = 0;
  Result<TrainResult> result =
      TrainPredictor(set, config, [&](const EpochReport& e) { epochs_seen = e.epoch; });
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(epochs_seen, result->epochs_run);
  EXPECT_GT(result->holdout_r2, 0.8) << "best epoch " << result->best_epoch;

  // The evaluation path (raw features through a Predictor) agrees with the trainer's R², and
  // budget adjustment keeps at least the raw seeds' retention (mean y ≈ 5, so it grows).
  const dvl::Predictor predictor(dvl::MakeProjections(8, 40, 77), result->weights);
  Result<EvalReport> report = EvaluatePredictor(predictor, set, result->split.holdout);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_NEAR(report->r2, result->holdout_r2, 1e-4);
  EXPECT_GE(report->retention_adjusted, report->retention_raw);
  EXPECT_GT(report->retention_adjusted, 0.9);
  EXPECT_NEAR(report->mean_window_adjusted, 8.0, 1e-9);
}

TEST(PredictorTrainerTest, SameSeedSameWeights) {
  const TraceSet set = testing::SyntheticTraces(600, 7);
  TrainerConfig config;
  config.max_epochs = 3;
  const TrainResult a = TrainPredictor(set, config).value();
  const TrainResult b = TrainPredictor(set, config).value();
  EXPECT_EQ(a.weights.w1, b.weights.w1);
  EXPECT_EQ(a.weights.b2, b.weights.b2);
  EXPECT_EQ(a.holdout_loss, b.holdout_loss);
  config.seed = 2;
  const TrainResult c = TrainPredictor(set, config).value();
  EXPECT_NE(a.weights.w1, c.weights.w1);
}

TEST(PredictorTrainerTest, RejectsBadConfig) {
  const TraceSet set = testing::SyntheticTraces(60, 8);
  TrainerConfig config;
  config.holdout_fraction = 1.0;
  EXPECT_FALSE(TrainPredictor(set, config).ok());
  config = {};
  config.learning_rate = -1.0f;
  EXPECT_FALSE(TrainPredictor(set, config).ok());
  config = {};
  config.batch_size = 0;
  EXPECT_FALSE(TrainPredictor(set, config).ok());
}

}  // namespace
}  // namespace dscale::train
