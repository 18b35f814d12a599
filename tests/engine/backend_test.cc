// The step backend chosen by name (backend/backend.h): names, the int8 and Domino refusals; an
// engine on MakeBackend("cpu") against references computed without any engine or backend — plain
// greedy decoding (model/greedy_decode.h) and a sampling loop written here from the target's
// forward, the sampling law and the position uniforms; and `--device cuda`, which either gives
// the CUDA backend or an error naming why (no CUDA backend in this build, or no usable device).
// The CUDA backend's own tests are in tests/cuda.

#include "backend/backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "model/greedy_decode.h"
#include "spec/position_uniform.h"
#include "spec/sampling.h"
#include "support/tiny_models.h"

namespace dscale {
namespace {

class BackendTest : public testing::EngineFixture {
 protected:
  // Runs `prompts` on an engine over `backend` and returns the outputs in prompt order.
  std::vector<std::vector<int32_t>> RunOn(StepBackend& backend, const EngineConfig& config,
                                          const std::vector<std::vector<int32_t>>& prompts,
                                          const GenerationParams& params) {
    Result<std::unique_ptr<Engine>> engine = Engine::Create(backend, config);
    EXPECT_TRUE(engine.ok()) << engine.status().message();
    if (!engine.ok()) return {};
    std::vector<RequestId> ids;
    for (const auto& p : prompts) ids.push_back((*engine)->Submit(p, params).value());
    EXPECT_TRUE((*engine)->RunToCompletion().ok());
    std::vector<std::vector<int32_t>> outputs(prompts.size());
    for (RequestResult& r : (*engine)->TakeFinished()) {
      for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] == r.id) outputs[i] = r.output_ids;
      }
    }
    return outputs;
  }

  // Seeded sampling by its definition, one full forward of the whole context per token: the
  // token at position p is SampleIndex(P(· | tokens before p), PositionUniform(seed, p)), until
  // max_tokens or a stop id. K/V are cached as BF16, as the engine's are by default.
  std::vector<int32_t> SampledReference(const std::vector<int32_t>& prompt,
                                        const GenerationParams& params) {
    const int64_t vocab = target_.config().vocab_size;
    std::vector<int32_t> tokens = prompt;
    std::vector<int32_t> output;
    std::vector<double> probs;
    ForwardOutput out;
    while (static_cast<int32_t>(output.size()) < params.max_tokens) {
      const auto n = static_cast<int32_t>(tokens.size());
      PagedKvCache cache(target_.KvShape(16, (n + 15) / 16).WithDtype(KvDtype::kBf16));
      const int32_t seq = cache.AddSequence();
      EXPECT_TRUE(cache.Reserve(seq, n).ok());
      StepBatch batch;
      AddRequestRows(batch, seq, 0, tokens, cache, /*all_logits=*/false);
      EXPECT_TRUE(target_.Forward(batch, cache, &out).ok());
      TargetDistribution(std::span(out.logits).first(vocab), params.sampling, &probs);
      const int32_t token = SampleIndex(probs, PositionUniform(params.sampling.seed, n));
      tokens.push_back(token);
      output.push_back(token);
      const auto& stops = params.stop_ids;
      if (std::find(stops.begin(), stops.end(), token) != stops.end()) break;
    }
    return output;
  }
};

TEST_F(BackendTest, ChosenByName) {
  std::unique_ptr<DFlashDrafter> drafter = testing::RandomDrafter(target_, 9);
  Result<std::unique_ptr<StepBackend>> cpu = MakeBackend("cpu", target_, drafter.get());
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  EXPECT_EQ((*cpu)->name(), "cpu");
  EXPECT_EQ(&(*cpu)->target(), &target_);
  EXPECT_EQ((*cpu)->drafter(), drafter.get());

  const Result<std::unique_ptr<StepBackend>> other = MakeBackend("tpu", target_, nullptr);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("expected cpu or cuda, got tpu"), std::string::npos);

  EXPECT_TRUE(CheckWeightsForDevice("cpu", WeightsMode::kInt8).ok());
  EXPECT_TRUE(CheckWeightsForDevice("cuda", WeightsMode::kAsStored).ok());
  const Status int8 = CheckWeightsForDevice("cuda", WeightsMode::kInt8);
  EXPECT_NE(int8.message().find("CPU only"), std::string::npos) << int8.message();
  const Status int4 = CheckWeightsForDevice("cuda", WeightsMode::kInt4, "--drafter-weights");
  EXPECT_NE(int4.message().find("--drafter-weights int4: quantised weights run on the CPU only"),
            std::string::npos)
      << int4.message();

  std::unique_ptr<DFlashDrafter> domino = testing::RandomDominoDrafter(target_, 9);
  const Result<std::unique_ptr<StepBackend>> on_device = MakeBackend("cuda", target_, domino.get());
  ASSERT_FALSE(on_device.ok());
  EXPECT_NE(on_device.status().message().find("domino"), std::string::npos);
}

// --device cuda: the CUDA backend where a device is usable, else an error naming why. Both are
// right answers on some machine, so neither is a skip: the test checks whichever this one gives.
TEST_F(BackendTest, CudaGivesTheCudaBackendOrSaysWhyNot) {
  const Result<std::unique_ptr<StepBackend>> cuda = MakeBackend("cuda", target_, nullptr);
  if (cuda.ok()) {
    EXPECT_EQ((*cuda)->name(), "cuda");
    EXPECT_EQ(&(*cuda)->target(), &target_);
    EXPECT_EQ((*cuda)->drafter(), nullptr);
    return;
  }
  const std::string& why = cuda.status().message();
  EXPECT_TRUE(why.find("built without the CUDA backend") != std::string::npos ||
              why.find("no usable CUDA device") != std::string::npos)
      << why;
}

// Greedy requests through an engine on the CPU backend give plain greedy decoding's tokens
// (computed by GreedyDecode, which uses no engine and no backend), in every mode, token for token.
TEST_F(BackendTest, GreedyOnTheCpuBackendIsPlainGreedyDecoding) {
  std::unique_ptr<DFlashDrafter> drafter = testing::RandomDrafter(target_, 9);
  Result<std::unique_ptr<StepBackend>> cpu = MakeBackend("cpu", target_, drafter.get());
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  const auto prompts = testing::RandomPrompts(8, target_.config().vocab_size, 2);
  const GenerationParams params{.max_tokens = 12, .stop_ids = target_.config().eos_token_ids};
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) {
    expected.push_back(
        GreedyDecode(target_, p, {.max_new_tokens = 12, .stop_ids = params.stop_ids}).value());
  }
  for (const std::string mode : {"none", "dflash", "dscale", "fixed:5"}) {
    const EngineConfig config{.policy = LengthPolicy::Parse(mode).value(),
                              .max_running = 4,
                              .inputs = {.predictor = &predictor_}};
    const std::vector<std::vector<int32_t>> outputs = RunOn(**cpu, config, prompts, params);
    ASSERT_EQ(outputs.size(), prompts.size());
    EXPECT_EQ(testing::FirstDifference(outputs, expected), "") << mode;
  }
}

// Seeded sampling through an engine on the CPU backend gives the tokens of the sampling law
// applied directly (SampledReference), whatever the mode verifies. Float rounding can only move
// a draw that falls within rounding of a boundary between two tokens: at most one request may
// part from the reference.
TEST_F(BackendTest, SamplingOnTheCpuBackendFollowsTheSamplingLaw) {
  std::unique_ptr<DFlashDrafter> drafter = testing::RandomDrafter(target_, 9);
  Result<std::unique_ptr<StepBackend>> cpu = MakeBackend("cpu", target_, drafter.get());
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  const auto prompts = testing::RandomPrompts(8, target_.config().vocab_size, 2);
  GenerationParams params{.max_tokens = 12,
                          .sampling = {.temperature = 0.7f, .seed = 4},
                          .stop_ids = target_.config().eos_token_ids};
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) expected.push_back(SampledReference(p, params));
  // The reference is not trivially greedy: sampling moved some token somewhere.
  int sampled_differently = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int32_t> greedy =
        GreedyDecode(target_, prompts[i], {.max_new_tokens = 12, .stop_ids = params.stop_ids})
            .value();
    sampled_differently += greedy != expected[i];
  }
  EXPECT_GT(sampled_differently, 0);
  for (const std::string mode : {"none", "dflash", "dscale"}) {
    const EngineConfig config{.policy = LengthPolicy::Parse(mode).value(),
                              .max_running = 4,
                              .inputs = {.predictor = &predictor_}};
    const std::vector<std::vector<int32_t>> outputs = RunOn(**cpu, config, prompts, params);
    ASSERT_EQ(outputs.size(), prompts.size());
    EXPECT_EQ(testing::FirstDifference(outputs, expected), "") << mode;
  }
}

}  // namespace
}  // namespace dscale
