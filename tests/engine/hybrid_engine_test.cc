// Speculation on a dense Qwen3.5 hybrid target (EngineTestHybridConfig: Gated DeltaNet and gated
// attention layers mixed): greedy output in every mode — none, dflash, fixed:K, dscale at a
// fraction and with auto, dspark — at c = 1 and 16 equals plain greedy decoding token for token,
// with key/value head ratios 1 and 2, as stored (BF16) and with int4 projections under int8
// activations; and the same for the Qwen3.5 mixture of experts. A verify runs every row from the
// committed recurrent state on a working copy, and acceptance commits the kept prefix by replaying
// those rows' inputs (kv/recurrent_state.h): a state left at a rejected draft would change the next
// tokens, which the planted drafter's mixture of accepted and rejected drafts would show.

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <tuple>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "every_mode_lossless.h"
#include "model/quantize_weights.h"
#include "model/random_checkpoint.h"

namespace dscale {
namespace {

class HybridEngineTest : public ::testing::TestWithParam<std::tuple<int, WeightsMode>> {};

TEST_P(HybridEngineTest, GreedyOutputEqualsPlainDecodingInEveryModeAndConcurrency) {
  const auto [ratio, weights_mode] = GetParam();
  DecoderModel target =
      testing::RandomTarget(testing::EngineTestHybridConfig(2, 2 * ratio), weights_mode);
  ASSERT_FALSE(target.weights().layers[0].linear.empty());
  ASSERT_TRUE(target.weights().layers[1].linear.empty());
  testing::ExpectEveryModeEqualsPlainDecoding(target);
}

INSTANTIATE_TEST_SUITE_P(RatioAndWeights, HybridEngineTest,
                         ::testing::Combine(::testing::Values(1, 2),
                                            ::testing::Values(WeightsMode::kAsStored,
                                                              WeightsMode::kInt4)),
                         [](const ::testing::TestParamInfo<std::tuple<int, WeightsMode>>& info) {
                           return "ratio" + std::to_string(std::get<0>(info.param)) + "_" +
                                  (std::get<1>(info.param) == WeightsMode::kInt4 ? "int4" : "bf16");
                         });

// The Qwen3.5 mixture of experts (every MLP sparse, fused experts, a shared expert), as stored
// and in 4 bits: a verified row routes and runs its experts as a decoded row does.
class HybridMoeEngineTest : public ::testing::TestWithParam<WeightsMode> {};

TEST_P(HybridMoeEngineTest, GreedyOutputEqualsPlainDecodingInEveryModeAndConcurrency) {
  DecoderModel target = testing::RandomTarget(testing::EngineTestHybridMoeConfig(), GetParam());
  ASSERT_TRUE(target.weights().layers[1].moe.has_shared());
  testing::ExpectEveryModeEqualsPlainDecoding(target);
}

INSTANTIATE_TEST_SUITE_P(Weights, HybridMoeEngineTest,
                         ::testing::Values(WeightsMode::kAsStored, WeightsMode::kInt4),
                         [](const ::testing::TestParamInfo<WeightsMode>& info) {
                           return info.param == WeightsMode::kInt4 ? "int4" : "bf16";
                         });

// A negative bound on the prefix states kept is refused by name, and so is one whose states
// the memory cannot hold.
TEST(HybridEngineConfigTest, PrefixStatesOutOfRangeOrBeyondMemoryAreRefused) {
  const DecoderConfig c = testing::EngineTestHybridConfig(2, 2);
  DecoderModel target(c, RandomDecoderWeights(c, 5, DType::kF32));
  for (const int32_t states : {-1, std::numeric_limits<int32_t>::max()}) {
    const auto engine = Engine::Create(target, nullptr,
                                       {.policy = LengthPolicy::Parse("none").value(),
                                        .prefix_cache = true,
                                        .prefix_cache_states = states});
    ASSERT_FALSE(engine.ok()) << states;
    const std::string& message = engine.status().message();
    EXPECT_NE(message.find(states < 0 ? "prefix_cache_states" : "--prefix-cache-states"),
              std::string::npos)
        << message;
  }
}

}  // namespace
}  // namespace dscale
