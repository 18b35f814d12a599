// Speculation on a Qwen3-MoE target (EngineTestMoeConfig: sparse and dense layers mixed): greedy
// output in every mode — none, dflash, fixed:K, dscale at a fraction and with auto, dspark — at
// c = 1 and 16 equals plain greedy decoding token for token, with norm_topk_prob both ways, as
// stored (BF16) and with the experts in int4 under int8 activations. A verified row routes to its
// experts and computes them as a decoded row does, whatever rows share the step
// (tests/model/moe_layer_test.cc checks the block itself); the verify pass counts the experts
// its rows wake, and auto prices draft rows by them.

#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "every_mode_lossless.h"
#include "model/quantize_weights.h"
#include "model/random_checkpoint.h"
#include "planted_drafter.h"

namespace dscale {
namespace {

class MoeEngineTest : public ::testing::TestWithParam<std::tuple<bool, WeightsMode>> {};

TEST_P(MoeEngineTest, GreedyOutputEqualsPlainDecodingInEveryModeAndConcurrency) {
  const auto [norm_topk_prob, weights_mode] = GetParam();
  DecoderModel target =
      testing::RandomTarget(testing::EngineTestMoeConfig(norm_topk_prob), weights_mode);
  ASSERT_FALSE(target.weights().layers[0].moe.empty());
  ASSERT_TRUE(target.weights().layers[1].moe.empty());
  testing::ExpectEveryModeEqualsPlainDecoding(target);
}

INSTANTIATE_TEST_SUITE_P(NormAndWeights, MoeEngineTest,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Values(WeightsMode::kAsStored,
                                                              WeightsMode::kInt4)),
                         [](const ::testing::TestParamInfo<std::tuple<bool, WeightsMode>>& info) {
                           return std::string(std::get<0>(info.param) ? "norm_topk" : "raw_topk") +
                                  "_" +
                                  (std::get<1>(info.param) == WeightsMode::kInt4 ? "int4" : "bf16");
                         });

// The verify pass counts the experts its rows wake (StepStats::verify_experts_per_layer): one row
// wakes exactly k per sparse layer, four rows between k and 4·k, and a dense target none.
TEST(MoeEngineStatsTest, VerifyStepsCountTheExpertsTheirRowsWake) {
  auto experts_per_step = [](const DecoderConfig& c, int32_t concurrency) {
    DecoderModel target(c, RandomDecoderWeights(c, 5, DType::kBF16));
    auto engine =
        Engine::Create(target, nullptr,
                       {.policy = LengthPolicy::Parse("none").value(), .max_running = concurrency})
            .value();
    for (uint32_t i = 1; i <= 4; ++i) {
      EXPECT_TRUE(engine
                      ->Submit(testing::RandomTokens(static_cast<int32_t>(4 + i), 120, i),
                               {.max_tokens = 6})
                      .ok());
    }
    EXPECT_TRUE(engine->RunToCompletion().ok());
    const StepStats& s = engine->stats();
    EXPECT_GT(s.decode_steps, 0);
    EXPECT_EQ(s.expert_counted_steps, c.SparseLayerCount() > 0 ? s.decode_steps : 0)
        << "no prompt rode in a verify pass here (the prompts start together)";
    return s.expert_counted_steps > 0 ? s.verify_experts_per_layer / double(s.expert_counted_steps)
                                      : 0.0;
  };
  const DecoderConfig moe = testing::EngineTestMoeConfig(true);  // 8 experts, top 2
  EXPECT_DOUBLE_EQ(experts_per_step(moe, 1), 2.0);
  const double four = experts_per_step(moe, 4);
  EXPECT_GT(four, 2.0);
  EXPECT_LE(four, 8.0);
  EXPECT_EQ(experts_per_step(testing::EngineTestTargetConfig(), 4), 0.0);
}

// With --verify-budget auto on a sparse target the budget prices draft rows by their experts: the
// engine hands it each step's span occupancy (prompts of at least 16 tokens show u(16)) and the
// experts its verify woke. auto-rows, and any dense target, keep no expert model.
TEST(MoeEngineStatsTest, AutoPricesDraftRowsByTheExpertsThePromptsShowed) {
  const DecoderConfig moe = testing::EngineTestMoeConfig(true);  // 8 experts, top 2
  const auto run = [](const DecoderConfig& c, const char* budget) {
    DecoderModel target(c, RandomDecoderWeights(c, 5, DType::kBF16));
    const dvl::Predictor predictor = testing::RandomPredictor(c.hidden_size, c.vocab_size, 3);
    testing::PlantedDrafter planted(target, 16, /*salt=*/24);
    std::vector<std::vector<int32_t>> prompts;
    for (uint32_t i = 0; i < 6; ++i) {
      prompts.push_back(testing::RandomTokens(static_cast<int32_t>(18 + i), 120, i + 1));
    }
    const EngineConfig config{
        .policy = LengthPolicy::Parse("dscale").value(),
        .max_running = 4,
        .inputs = {.predictor = &predictor,
                   .verify_budget = budget::VerifyBudget::Parse(budget).value()}};
    return testing::RunPrompts(target, &planted, config, prompts, {.max_tokens = 12});
  };
  const testing::EngineRun priced = run(moe, "auto");
  ASSERT_TRUE(priced.stats.auto_budget.has_value());
  const budget::AutoBudgetSnapshot& a = *priced.stats.auto_budget;
  EXPECT_TRUE(a.experts_priced);
  // u(16) − u(1): more than none, at most the experts a request's first row left asleep.
  EXPECT_GT(a.expert_own_rows, 0.0);
  EXPECT_LE(a.expert_own_rows, 8.0 - 2.0);
  EXPECT_FALSE(run(moe, "auto-rows").stats.auto_budget->experts_priced);
  EXPECT_FALSE(run(testing::EngineTestTargetConfig(), "auto").stats.auto_budget->experts_priced);
}

}  // namespace
}  // namespace dscale
