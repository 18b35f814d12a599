// Speculation with a newer DFlash drafter's layer layout (causal sliding-window layers beside a
// full one, scaled block embeddings: LayeredTestDrafterConfig) stays lossless: greedy output
// equals plain decoding under the dflash and dscale policies at c = 1 and 16, on a Qwen3 and a
// Llama 3 target. The drafts themselves: DFlashDrafterTest (tests/model).

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "model/greedy_decode.h"
#include "model/random_checkpoint.h"

namespace dscale {
namespace {

using testing::EngineRun;
using testing::RandomPrompts;
using testing::RunPrompts;

void ExpectGreedyOutputEqualsPlainDecoding(DecoderModel& target, const dvl::Predictor& predictor) {
  const KvDtype kv = KvDtype::kBf16;
  const auto prompts = RandomPrompts(24, target.config().vocab_size, 13);
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) {
    expected.push_back(
        GreedyDecode(
            target, p,
            {.max_new_tokens = 20, .stop_ids = target.config().eos_token_ids, .kv_dtype = kv})
            .value());
  }
  std::unique_ptr<DFlashDrafter> drafter =
      testing::RandomDrafter(target, 9, testing::LayeredTestDrafterConfig(target.config()));
  ASSERT_FALSE(drafter->config().IsPlainLayout());
  for (const std::string mode : {"dflash", "dscale"}) {
    for (const int32_t c : {1, 16}) {
      EngineConfig config{.policy = LengthPolicy::Parse(mode).value(),
                          .max_running = c,
                          .kv_dtype = kv,
                          .inputs = {.predictor = &predictor}};
      const EngineRun run =
          RunPrompts(target, drafter.get(), config, prompts,
                     {.max_tokens = 20, .stop_ids = target.config().eos_token_ids});
      EXPECT_EQ(testing::FirstDifference(run.outputs, expected), "") << mode << " c=" << c;
      EXPECT_EQ(run.free_pages_after, run.total_pages) << mode << " c=" << c;
    }
  }
}

class DraftLayoutEngineTest : public testing::EngineFixture {};

TEST_F(DraftLayoutEngineTest, GreedyOutputEqualsPlainDecodingOnAQwen3Target) {
  ExpectGreedyOutputEqualsPlainDecoding(target_, predictor_);
}

TEST(DraftLayoutLlamaEngineTest, GreedyOutputEqualsPlainDecodingOnALlamaTarget) {
  DecoderModel target(testing::EngineTestLlamaConfig(),
                      RandomDecoderWeights(testing::EngineTestLlamaConfig(), 5, DType::kF32));
  const dvl::Predictor predictor =
      testing::RandomPredictor(target.config().hidden_size, target.config().vocab_size, 3);
  ExpectGreedyOutputEqualsPlainDecoding(target, predictor);
}

}  // namespace
}  // namespace dscale
