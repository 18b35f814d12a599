// The CUDA step backend (backend/cuda_backend.cc) as `--device cuda` runs it: MakeBackend uploads
// the models, and greedy steps verify and accept in one device pass on the bucket's
// VerifyWorkspace (eager once, then a captured graph), while sampled steps take the host stages
// over the same device models. Every test skips where no CUDA device is usable.
//
// Ties: as in device_target_test.cc, a greedy choice may differ from plain decoding on the device
// only where its top two logits are within testing::kBf16DeviceTieTolerance.

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu_backend.h"
#include "cuda/cuda_test_util.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "model/greedy_decode.h"
#include "model/logit_bounds.h"
#include "model/random_checkpoint.h"
#include "support/tiny_models.h"

namespace dscale {
namespace {

using testing::CudaTest;

// Outputs in prompt order of one engine over `backend`; every KV page is free afterwards.
std::vector<std::vector<int32_t>> RunOn(StepBackend& backend, const EngineConfig& config,
                                        const std::vector<std::vector<int32_t>>& prompts,
                                        const GenerationParams& params) {
  testing::EngineRun run = testing::RunPrompts(backend, config, prompts, params);
  EXPECT_EQ(run.free_pages_after, run.total_pages);
  return std::move(run.outputs);
}

class CudaBackendTest : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    const DecoderConfig config = testing::EngineTestTargetConfig();
    host_.emplace(config, RandomDecoderWeights(config, 5, DType::kBF16));
    drafter_ = testing::RandomDrafter(*host_, 9);
    Result<std::unique_ptr<StepBackend>> backend = MakeBackend("cuda", *host_, drafter_.get());
    ASSERT_TRUE(backend.ok()) << backend.status().message();
    backend_ = std::move(backend).value();
    predictor_.emplace(testing::RandomPredictor(config.hidden_size, config.vocab_size, 6));
  }

  std::optional<DecoderModel> host_;
  std::unique_ptr<DFlashDrafter> drafter_;
  std::unique_ptr<StepBackend> backend_;
  std::optional<dvl::Predictor> predictor_;
};

TEST_F(CudaBackendTest, IsChosenByName) {
  EXPECT_EQ(backend_->name(), "cuda");
  ASSERT_NE(backend_->drafter(), nullptr);
  EXPECT_EQ(backend_->target().KvShape(16, 4).num_layers, 0) << "K/V rows live on the device";
  EXPECT_FALSE(CheckWeightsForDevice("cuda", WeightsMode::kInt8).ok());
}

// Greedy dflash and dscale at c = 1 and 5 through the device pass (the same bucket replayed from
// its graph for most steps): output equals plain greedy decoding on the device up to ties, and a
// second engine (a new cache: the workspaces and graphs are made again) repeats the first.
TEST_F(CudaBackendTest, GreedyStepsOnTheDeviceAreLossless) {
  const std::vector<std::vector<int32_t>> prompts =
      testing::RandomPrompts(10, host_->config().vocab_size, 12);
  const GenerationParams params{.max_tokens = 20, .stop_ids = host_->config().eos_token_ids};
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) {
    expected.push_back(
        GreedyDecode(backend_->target(), p, {.max_new_tokens = 20, .stop_ids = params.stop_ids})
            .value());
  }
  for (const std::string mode : {"dflash", "dscale"}) {
    for (const int32_t c : {1, 5}) {
      const EngineConfig config{.policy = LengthPolicy::Parse(mode).value(),
                                .max_running = c,
                                .inputs = {.predictor = &*predictor_}};
      const auto first = RunOn(*backend_, config, prompts, params);
      int ties = 0;
      for (size_t i = 0; i < prompts.size(); ++i) {
        testing::SameGreedyOutputUpToTies(backend_->target(), prompts[i], first[i], expected[i],
                                          &ties, testing::kBf16DeviceTieTolerance);
      }
      EXPECT_LE(ties, 1) << mode << " c=" << c;
      EXPECT_EQ(RunOn(*backend_, config, prompts, params), first) << mode << " c=" << c;
    }
  }
}

// Sampled requests take the host stages over the device models: the same outputs, bit for bit,
// as an engine whose stages are the host's over the same device target and drafter.
TEST_F(CudaBackendTest, SampledStepsMatchTheHostStagesOnTheSameModels) {
  const std::vector<std::vector<int32_t>> prompts =
      testing::RandomPrompts(6, host_->config().vocab_size, 4);
  const GenerationParams params{.max_tokens = 16,
                                .sampling = {.temperature = 0.8f, .top_k = 20, .seed = 3},
                                .stop_ids = host_->config().eos_token_ids};
  const EngineConfig config{.policy = LengthPolicy::Parse("dscale").value(),
                            .max_running = 4,
                            .inputs = {.predictor = &*predictor_}};
  const auto on_device = RunOn(*backend_, config, prompts, params);
  CpuBackend host_stages(backend_->target(), backend_->drafter());
  EXPECT_EQ(RunOn(host_stages, config, prompts, params), on_device);
}

}  // namespace
}  // namespace dscale
