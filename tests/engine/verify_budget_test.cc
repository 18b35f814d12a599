// --verify-budget auto and --spec dspark in the engine: greedy output equal to plain decoding,
// seeded sampling that emits the same tokens whatever the budget, and the lengths each step
// verifies within their contracts.

#include <gtest/gtest.h>

#include <random>

#include "engine/engine.h"
#include "engine/sps_profile.h"
#include "engine_test_util.h"
#include "model/greedy_decode.h"
#include "model/random_checkpoint.h"
#include "planted_drafter.h"

namespace dscale {
namespace {

using testing::EngineRun;
using testing::EngineTestTargetConfig;
using testing::RandomPrompts;
using testing::RunPrompts;

// A steps-per-second table shaped like a CPU's: each verified row costs more.
budget::SpsTable CpuLikeSps() {
  return {.tokens = {1, 16, 64, 512}, .steps_per_second = {500, 200, 60, 8}};
}

class VerifyBudgetEngineTest : public testing::EngineFixture {
 protected:
  EngineConfig Config(const std::string& spec, const std::string& budget, int32_t c) {
    EngineConfig config{.policy = LengthPolicy::Parse(spec).value(),
                        .max_running = c,
                        .inputs = {.predictor = &predictor_,
                                   .verify_budget = budget::VerifyBudget::Parse(budget).value()}};
    if (config.policy.mode == SpecMode::kDSpark) config.inputs.sps_table = &sps_;
    return config;
  }

  budget::SpsTable sps_ = CpuLikeSps();
};

TEST_F(VerifyBudgetEngineTest, GreedyOutputEqualsPlainDecodingWithAutoAndDSpark) {
  const auto prompts = RandomPrompts(40, target_.config().vocab_size, 21, 30);
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) {
    expected.push_back(GreedyDecode(target_, p, {.max_new_tokens = 24}).value());
  }
  std::unique_ptr<DFlashDrafter> dflash = testing::RandomDrafter(target_, 9);
  testing::PlantedDrafter planted(target_, 16, /*salt=*/5);
  for (Drafter* drafter : std::vector<Drafter*>{&planted, dflash.get()}) {
    for (const auto& [spec, budget] : {std::pair{"dscale", "auto"}, std::pair{"dspark", "0.5"}}) {
      for (int32_t c : {1, 16}) {
        const EngineRun run =
            RunPrompts(target_, drafter, Config(spec, budget, c), prompts, {.max_tokens = 24});
        EXPECT_EQ(testing::FirstDifference(run.outputs, expected), "") << spec << " c=" << c;
        EXPECT_EQ(run.free_pages_after, run.total_pages);
        EXPECT_EQ(run.stats.auto_budget.has_value(), std::string(budget) == "auto");
      }
    }
  }
}

// Seeded sampling draws the token at each position from that position's uniform, so every
// policy and budget emits plain sampling's tokens, exactly: a logit row has the same bits whatever
// rows share its forward, so no uniform can fall on different sides of a boundary.
TEST_F(VerifyBudgetEngineTest, SeededSamplingEmitsTheSameTokensForEveryPolicyAndBudget) {
  const auto prompts = RandomPrompts(24, target_.config().vocab_size, 22, 30);
  testing::PlantedDrafter planted(target_, 16, /*salt=*/8, /*error_free_share=*/0.3);
  const GenerationParams params{.max_tokens = 20,
                                .sampling = {.temperature = 0.8f, .top_p = 0.95f, .seed = 99}};
  const EngineRun plain = RunPrompts(target_, nullptr, Config("none", "0.5", 4), prompts, params);
  int64_t accepted = 0;
  for (const auto& [spec, budget] :
       {std::pair{"dflash", "0.5"}, std::pair{"fixed:4", "0.5"}, std::pair{"dscale", "0.5"},
        std::pair{"dscale", "0.25"}, std::pair{"dscale", "auto"}, std::pair{"dspark", "0.5"}}) {
    for (int32_t c : {1, 4, 16}) {
      const EngineRun run = RunPrompts(target_, &planted, Config(spec, budget, c), prompts, params);
      EXPECT_EQ(testing::FirstDifference(run.outputs, plain.outputs), "")
          << spec << " " << budget << " c=" << c;
      for (const RequestResult& r : run.results) {
        for (int32_t a : r.accepted) accepted += a;
      }
    }
  }
  EXPECT_GT(accepted, 100) << "drafts must be accepted for the comparison to mean anything";
}

// Every auto step verifies between the anchors and the whole blocks, and requests without
// drafts (plain steps, or requests without a draft context) verify only their anchor.
TEST_F(VerifyBudgetEngineTest, AutoStepsStayWithinTheirRowRange) {
  const auto prompts = RandomPrompts(30, target_.config().vocab_size, 23, 30);
  testing::PlantedDrafter planted(target_, 16, /*salt=*/6);
  EngineConfig config = Config("dscale", "auto", 8);
  int64_t steps = 0, anchor_only = 0;
  config.on_step = [&](const StepRecord& s) {
    ++steps;
    int64_t rows = 0;
    for (size_t i = 0; i < s.rows.size(); ++i) {
      EXPECT_GE(s.rows[i], 1);
      EXPECT_LE(s.rows[i], 16);
      EXPECT_LE(s.accepted[i], s.rows[i] - 1);
      rows += s.rows[i];
    }
    anchor_only += rows == static_cast<int64_t>(s.rows.size());
  };
  const EngineRun run = RunPrompts(target_, &planted, config, prompts, {.max_tokens = 30});
  EXPECT_EQ(steps, run.stats.decode_steps);
  ASSERT_TRUE(run.stats.auto_budget.has_value());
  const budget::AutoBudgetSnapshot& a = *run.stats.auto_budget;
  EXPECT_EQ(a.drafted_steps + a.plain_steps, run.stats.decode_steps);
  EXPECT_GE(a.verify_bins, 2) << "the cold steps visit several row counts";
  EXPECT_GT(a.verify_samples, 0);
}

// With planted GPU-shaped step times (memory-bound up to W·N/2 = 128 rows at N = 16), auto
// settles on the paper's budget in the real engine: the median rows of full 16-request steps
// after the first 20 is within 15% of 128.
TEST_F(VerifyBudgetEngineTest, AutoConvergesNearHalfTheBlockOnPlantedGpuStepTimes) {
  const auto prompts = RandomPrompts(64, target_.config().vocab_size, 24, 30);
  testing::PlantedDrafter planted(target_, 16, /*salt=*/3, /*error_free_share=*/0.3);
  const budget::SimulatedPair gpu = budget::GpuShapedPair(/*knee_rows=*/128);
  EngineConfig config = Config("dscale", "auto", 16);

  std::vector<int64_t> rows;
  config.on_step = [&](const StepRecord& s) {
    if (s.step < 20 || s.rows.size() != 16) return;
    int64_t sum = 0;
    for (int32_t k : s.rows) sum += k;
    rows.push_back(sum);
  };
  const budget::PlantedStepTimes gpu_times(gpu);
  const EngineRun run =
      RunPrompts(target_, &planted, config, prompts, {.max_tokens = 200}, &gpu_times);
  ASSERT_GT(rows.size(), 30u);
  std::nth_element(rows.begin(), rows.begin() + rows.size() / 2, rows.end());
  const int64_t median = rows[rows.size() / 2];
  EXPECT_GE(median, 0.85 * 128);
  EXPECT_LE(median, 1.15 * 128);
  EXPECT_EQ(run.stats.auto_budget->mode, budget::AutoMode::kSpeculate);
}

// With planted CPU-shaped step times (a row costs a quarter of a plain step, drafting about a
// whole one) and drafts that are rarely accepted, auto turns to plain decoding within a bounded
// number of steps: new requests get no draft context and most steps verify anchors only.
TEST_F(VerifyBudgetEngineTest, AutoSettlesOnPlainDecodingOnPlantedCpuStepTimes) {
  const auto prompts = RandomPrompts(40, target_.config().vocab_size, 25, 30);
  // A random DFlash drafter: its drafts are almost never accepted.
  std::unique_ptr<DFlashDrafter> dflash = testing::RandomDrafter(target_, 9);
  const budget::SimulatedPair cpu = budget::CpuShapedPair();
  EngineConfig config = Config("dscale", "auto", 4);

  int64_t anchor_only = 0, steps = 0;
  config.on_step = [&](const StepRecord& s) {
    ++steps;
    int64_t sum = 0;
    for (int32_t k : s.rows) sum += k;
    anchor_only += sum == static_cast<int64_t>(s.rows.size());
  };
  const budget::PlantedStepTimes cpu_times(cpu);
  const EngineRun run =
      RunPrompts(target_, dflash.get(), config, prompts, {.max_tokens = 40}, &cpu_times);
  ASSERT_TRUE(run.stats.auto_budget.has_value());
  const budget::AutoBudgetSnapshot& a = *run.stats.auto_budget;
  EXPECT_EQ(a.mode, budget::AutoMode::kPlain);
  EXPECT_GT(anchor_only, 0.8 * double(steps));
  EXPECT_LT(a.drafted_steps, 40);
}

TEST(SpsProfileTest, ProbesEverySizeUpTo32ThenAboutAnEighthApart) {
  EXPECT_EQ(SpsProbeSizes(5), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  const std::vector<int64_t> sizes = SpsProbeSizes(256);
  EXPECT_EQ(sizes[31], 32);
  EXPECT_EQ(sizes[32], 36);
  EXPECT_EQ(sizes.back(), 256);
  for (size_t i = 32; i < sizes.size(); ++i) {
    EXPECT_LE(sizes[i] - sizes[i - 1], sizes[i - 1] / 8 + 1);
  }
}

TEST(SpsProfileTest, ProfilesTheVerifyForwardIntoAValidTable) {
  const DecoderConfig config = EngineTestTargetConfig();
  DecoderModel target(config, RandomDecoderWeights(config, 5, DType::kF32));
  const Result<budget::SpsTable> table = ProfileStepsPerSecond(
      target, {.max_tokens = 40, .block = 16, .context = 24, .repeats = 2, .capture_layers = {1}});
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_TRUE(table->Validate().ok());
  EXPECT_EQ(table->tokens, SpsProbeSizes(40));
  EXPECT_EQ(table->context, 24);
  EXPECT_FALSE(ProfileStepsPerSecond(target, {.max_tokens = 0}).ok());
}

TEST_F(VerifyBudgetEngineTest, DSparkNeedsATableAndThePredictor) {
  testing::PlantedDrafter planted(target_, 16, 1);
  EngineConfig config = Config("dspark", "0.5", 4);
  config.inputs.sps_table = nullptr;
  EXPECT_NE(Engine::Create(target_, &planted, config).status().message().find("steps-per-second"),
            std::string::npos);
  config = Config("dspark", "0.5", 4);
  config.inputs.predictor = nullptr;
  EXPECT_NE(Engine::Create(target_, &planted, config).status().message().find("--predictor"),
            std::string::npos);
}

}  // namespace
}  // namespace dscale
