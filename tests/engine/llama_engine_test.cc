// Speculation on a Llama 3 target (no q/k norms, llama3 RoPE scaling; EngineTestLlamaConfig):
// greedy output in every mode at c = 1 and 16 equals plain greedy decoding, as the Qwen3 tests
// (engine_test.cc) require. The forward itself: tests/model/llama_model_test.cc.

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "model/greedy_decode.h"
#include "model/random_checkpoint.h"
#include "planted_drafter.h"

namespace dscale {
namespace {

using testing::EngineRun;
using testing::RandomPrompts;
using testing::RunPrompts;

class LlamaEngineTest : public ::testing::Test {
 protected:
  LlamaEngineTest()
      : target_(testing::EngineTestLlamaConfig(),
                RandomDecoderWeights(testing::EngineTestLlamaConfig(), 5, DType::kF32)),
        predictor_(testing::RandomPredictor(target_.config().hidden_size,
                                            target_.config().vocab_size, 3)) {}

  std::vector<std::vector<int32_t>> Reference(const std::vector<std::vector<int32_t>>& prompts,
                                              int32_t max_tokens, KvDtype kv) {
    std::vector<std::vector<int32_t>> outputs;
    for (const auto& p : prompts) {
      GreedyOptions options{
          .max_new_tokens = max_tokens, .stop_ids = target_.config().eos_token_ids, .kv_dtype = kv};
      outputs.push_back(GreedyDecode(target_, p, options).value());
    }
    return outputs;
  }

  DecoderModel target_;
  dvl::Predictor predictor_;
};

TEST_F(LlamaEngineTest, TheConfigIsALlamaOneWithScaledRope) {
  const DecoderConfig& c = target_.config();
  EXPECT_EQ(c.family, ModelFamily::kLlama);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_TRUE(target_.weights().layers[0].q_norm.empty());
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLlama3);
}

// As EngineKvDtypeTest.GreedyOutputIsIdenticalAcrossModesAndConcurrency (engine_test.cc), on the
// default BF16 cache: none, dflash (random DFlash drafter and planted drafter), fixed:4, 9, 16
// and dscale at c = 1 and 16, token for token.
TEST_F(LlamaEngineTest, GreedyOutputEqualsPlainDecodingInEveryModeAndConcurrency) {
  const KvDtype kv = KvDtype::kBf16;
  const auto prompts = RandomPrompts(24, target_.config().vocab_size, 1);
  const auto expected = Reference(prompts, 20, kv);
  std::unique_ptr<DFlashDrafter> dflash = testing::RandomDrafter(target_, 9);
  testing::PlantedDrafter planted(target_, 16, /*salt=*/21);
  const std::vector<std::pair<std::string, Drafter*>> modes = {
      {"none", nullptr},     {"dflash", dflash.get()}, {"dflash", &planted},
      {"fixed:4", &planted}, {"fixed:9", &planted},    {"fixed:16", &planted},
      {"dscale", &planted},  {"dscale", dflash.get()},
  };
  for (const auto& [mode, drafter] : modes) {
    for (int32_t c : {1, 16}) {
      EngineConfig config{
          .policy = LengthPolicy::Parse(mode).value(), .max_running = c, .kv_dtype = kv};
      if (config.policy.UsesPredictor()) config.inputs.predictor = &predictor_;
      const EngineRun run =
          RunPrompts(target_, drafter, config, prompts,
                     {.max_tokens = 20, .stop_ids = target_.config().eos_token_ids});
      EXPECT_EQ(testing::FirstDifference(run.outputs, expected), "") << mode << " c=" << c;
      EXPECT_EQ(run.free_pages_after, run.total_pages) << mode;
      if (drafter == &planted && mode != "none") {
        EXPECT_GT(run.stats.tau(), 1.5) << mode << " c=" << c << ": drafts must be accepted";
      }
    }
  }
}

}  // namespace
}  // namespace dscale
