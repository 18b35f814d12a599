// Speculation on a Qwen3-MoE target (EngineTestMoeConfig: sparse and dense layers mixed): greedy
// output in every mode — none, dflash, fixed:K, dscale at a fraction and with auto, dspark — at
// c = 1 and 16 equals plain greedy decoding token for token, with norm_topk_prob both ways, as
// stored (BF16) and with the experts in int4 under int8 activations. A verified row routes to its
// experts and computes them as a decoded row does, whatever rows share the step
// (tests/model/moe_layer_test.cc checks the block itself).

#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "every_mode_lossless.h"
#include "model/quantize_weights.h"
#include "model/random_checkpoint.h"

namespace dscale {
namespace {

class MoeEngineTest : public ::testing::TestWithParam<std::tuple<bool, WeightsMode>> {};

TEST_P(MoeEngineTest, GreedyOutputEqualsPlainDecodingInEveryModeAndConcurrency) {
  const auto [norm_topk_prob, weights_mode] = GetParam();
  const DecoderConfig c = testing::EngineTestMoeConfig(norm_topk_prob);
  DecoderWeights weights = RandomDecoderWeights(c, 5, DType::kBF16);
  ASSERT_FALSE(weights.layers[0].moe.empty());
  ASSERT_TRUE(weights.layers[1].moe.empty());
  ActivationModes activations;
  if (weights_mode != WeightsMode::kAsStored) {
    QuantizeProjections(&weights, weights_mode);
    activations.int8 = cpu::Int8Activations::kInt8;
  }
  DecoderModel target(c, std::move(weights));
  target.set_activations(activations);
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

}  // namespace
}  // namespace dscale
