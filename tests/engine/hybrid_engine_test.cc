// Speculation on a dense Qwen3.5 hybrid target (EngineTestHybridConfig: Gated DeltaNet and gated
// attention layers mixed): greedy output in every mode — none, dflash, fixed:K, dscale at a
// fraction and with auto, dspark — at c = 1 and 16 equals plain greedy decoding token for token,
// with key/value head ratios 1 and 2, as stored (BF16) and with int4 projections under int8
// activations. A verify runs every row from the committed recurrent state on a working copy, and
// acceptance commits the kept prefix by replaying those rows' inputs (kv/recurrent_state.h): a
// state left at a rejected draft would change the next tokens, which the planted drafter's
// mixture of accepted and rejected drafts would show.

#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "budget/sps_table.h"
#include "budget/verify_budget.h"
#include "engine/engine.h"
#include "engine_test_util.h"
#include "model/greedy_decode.h"
#include "model/quantize_weights.h"
#include "model/random_checkpoint.h"
#include "planted_drafter.h"

namespace dscale {
namespace {

using testing::EngineRun;
using testing::RandomPrompts;
using testing::RunPrompts;

class HybridEngineTest : public ::testing::TestWithParam<std::tuple<int, WeightsMode>> {};

TEST_P(HybridEngineTest, GreedyOutputEqualsPlainDecodingInEveryModeAndConcurrency) {
  const auto [ratio, weights_mode] = GetParam();
  const DecoderConfig c = testing::EngineTestHybridConfig(2, 2 * ratio);
  DecoderWeights weights = RandomDecoderWeights(c, 5, DType::kBF16);
  ASSERT_FALSE(weights.layers[0].linear.empty());
  ASSERT_TRUE(weights.layers[1].linear.empty());
  ActivationModes activations;
  if (weights_mode != WeightsMode::kAsStored) {
    QuantizeProjections(&weights, weights_mode);
    activations.int8 = cpu::Int8Activations::kInt8;
  }
  DecoderModel target(c, std::move(weights));
  target.set_activations(activations);
  const dvl::Predictor predictor = testing::RandomPredictor(c.hidden_size, c.vocab_size, 3);
  const auto prompts = RandomPrompts(24, c.vocab_size, 13);
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) {
    expected.push_back(
        GreedyDecode(target, p, {.max_new_tokens = 20, .stop_ids = c.eos_token_ids}).value());
  }
  std::unique_ptr<DFlashDrafter> dflash = testing::RandomDrafter(target, 9);
  testing::PlantedDrafter planted(target, 16, /*salt=*/24);
  const budget::SpsTable sps = {.tokens = {1, 16, 64, 512}, .steps_per_second = {500, 200, 60, 8}};
  struct Mode {
    const char* spec;
    const char* budget;
    Drafter* drafter;
  };
  for (const Mode& mode : {Mode{"none", "0.5", nullptr}, Mode{"dflash", "0.5", dflash.get()},
                           Mode{"dflash", "0.5", &planted}, Mode{"fixed:4", "0.5", &planted},
                           Mode{"fixed:16", "0.5", &planted}, Mode{"dscale", "0.5", dflash.get()},
                           Mode{"dscale", "auto", &planted}, Mode{"dspark", "0.5", &planted}}) {
    for (int32_t concurrency : {1, 16}) {
      SCOPED_TRACE(::testing::Message()
                   << mode.spec << " budget " << mode.budget << " c=" << concurrency);
      EngineConfig config{
          .policy = LengthPolicy::Parse(mode.spec).value(),
          .max_running = concurrency,
          .inputs = {.predictor = &predictor,
                     .verify_budget = budget::VerifyBudget::Parse(mode.budget).value()}};
      if (config.policy.mode == SpecMode::kDSpark) config.inputs.sps_table = &sps;
      const EngineRun run = RunPrompts(target, mode.drafter, config, prompts,
                                       {.max_tokens = 20, .stop_ids = c.eos_token_ids});
      EXPECT_EQ(testing::FirstDifference(run.outputs, expected), "");
      EXPECT_EQ(run.free_pages_after, run.total_pages);
      if (mode.drafter == &planted && std::string(mode.budget) != "auto") {
        EXPECT_GT(run.stats.tau(), 1.5) << "drafts must be accepted";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RatioAndWeights, HybridEngineTest,
                         ::testing::Combine(::testing::Values(1, 2),
                                            ::testing::Values(WeightsMode::kAsStored,
                                                              WeightsMode::kInt4)),
                         [](const ::testing::TestParamInfo<std::tuple<int, WeightsMode>>& info) {
                           return "ratio" + std::to_string(std::get<0>(info.param)) + "_" +
                                  (std::get<1>(info.param) == WeightsMode::kInt4 ? "int4" : "bf16");
                         });

// Prefix caching cannot restore a recurrent state: refused for a hybrid target by name.
TEST(HybridEngineConfigTest, PrefixCachingIsRefused) {
  const DecoderConfig c = testing::EngineTestHybridConfig(2, 2);
  DecoderModel target(c, RandomDecoderWeights(c, 5, DType::kF32));
  const auto engine = Engine::Create(
      target, nullptr, {.policy = LengthPolicy::Parse("none").value(), .prefix_cache = true});
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("linear_attention"), std::string::npos)
      << engine.status().message();
}

}  // namespace
}  // namespace dscale
