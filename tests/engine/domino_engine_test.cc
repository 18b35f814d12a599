// Speculation with a Domino head stays lossless: greedy output equals plain decoding at
// c = 1, 16 and 32 under the dflash and dscale policies (on either KV dtype), like the plain
// drafter's tests in engine_test.cc. The head changes which tokens are proposed, never which are
// accepted: acceptance compares each proposal with the target's own choice.

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "model/greedy_decode.h"
#include "model/random_checkpoint.h"

namespace dscale {
namespace {

using testing::EngineRun;
using testing::EngineTestTargetConfig;
using testing::RandomPrompts;
using testing::RunPrompts;

class DominoEngineTest : public testing::EngineFixture,
                         public ::testing::WithParamInterface<KvDtype> {};

TEST_P(DominoEngineTest, GreedyOutputEqualsPlainDecodingInDFlashAndDScaleModes) {
  const KvDtype kv = GetParam();
  const auto prompts = RandomPrompts(48, target_.config().vocab_size, 11);
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) {
    expected.push_back(
        GreedyDecode(
            target_, p,
            {.max_new_tokens = 24, .stop_ids = target_.config().eos_token_ids, .kv_dtype = kv})
            .value());
  }
  std::unique_ptr<DFlashDrafter> domino = testing::RandomDominoDrafter(target_, 9);
  for (const std::string mode : {"dflash", "dscale"}) {
    for (const int32_t c : {1, 16, 32}) {
      EngineConfig config{.policy = LengthPolicy::Parse(mode).value(),
                          .max_running = c,
                          .kv_dtype = kv,
                          .inputs = {.predictor = &predictor_}};
      const EngineRun run =
          RunPrompts(target_, domino.get(), config, prompts,
                     {.max_tokens = 24, .stop_ids = target_.config().eos_token_ids});
      EXPECT_EQ(testing::FirstDifference(run.outputs, expected), "") << mode << " c=" << c;
      EXPECT_EQ(run.free_pages_after, run.total_pages) << mode << " c=" << c;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KvDtypes, DominoEngineTest,
                         ::testing::Values(KvDtype::kBf16, KvDtype::kF32), testing::KvDtypeCase);

}  // namespace
}  // namespace dscale
