// The step backend chosen by name (backend/backend.h): names, the int8 and Domino refusals, and
// an engine on MakeBackend("cpu") against one made from the models themselves — the same host
// stages, so the same tokens. `--device cuda` here: an error naming why (no CUDA backend in this
// build, or no usable device); the CUDA backend's own tests are in tests/cuda.

#include "backend/backend.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "support/tiny_models.h"

namespace dscale {
namespace {

class BackendTest : public testing::EngineFixture {};

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

  std::unique_ptr<DFlashDrafter> domino = testing::RandomDominoDrafter(target_, 9);
  const Result<std::unique_ptr<StepBackend>> on_device = MakeBackend("cuda", target_, domino.get());
  ASSERT_FALSE(on_device.ok());
  EXPECT_NE(on_device.status().message().find("domino"), std::string::npos);
}

// Without a usable device (or without the CUDA backend) --device cuda fails naming the reason.
TEST_F(BackendTest, CudaWithoutADeviceSaysWhy) {
  const Result<std::unique_ptr<StepBackend>> cuda = MakeBackend("cuda", target_, nullptr);
  if (cuda.ok()) GTEST_SKIP() << "a CUDA device is usable here";
  const std::string& why = cuda.status().message();
  EXPECT_TRUE(why.find("built without the CUDA backend") != std::string::npos ||
              why.find("no usable CUDA device") != std::string::npos)
      << why;
}

TEST_F(BackendTest, EngineOnTheCpuBackendEqualsTheEngineOnTheModels) {
  std::unique_ptr<DFlashDrafter> drafter = testing::RandomDrafter(target_, 9);
  Result<std::unique_ptr<StepBackend>> cpu = MakeBackend("cpu", target_, drafter.get());
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  const auto prompts = testing::RandomPrompts(8, target_.config().vocab_size, 2);
  const GenerationParams params{.max_tokens = 12,
                                .sampling = {.temperature = 0.7f, .seed = 4},
                                .stop_ids = target_.config().eos_token_ids};
  for (const std::string mode : {"none", "dflash", "dscale"}) {
    const EngineConfig config{
        .policy = LengthPolicy::Parse(mode).value(), .max_running = 4, .predictor = &predictor_};
    const testing::EngineRun direct =
        testing::RunPrompts(target_, drafter.get(), config, prompts, params);
    Result<std::unique_ptr<Engine>> engine = Engine::Create(**cpu, config);
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    std::vector<RequestId> ids;
    for (const auto& p : prompts) ids.push_back((*engine)->Submit(p, params).value());
    ASSERT_TRUE((*engine)->RunToCompletion().ok());
    std::vector<std::vector<int32_t>> outputs(prompts.size());
    for (RequestResult& r : (*engine)->TakeFinished()) {
      for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] == r.id) outputs[i] = r.output_ids;
      }
    }
    EXPECT_EQ(outputs, direct.outputs) << mode;
  }
}

}  // namespace
}  // namespace dscale
