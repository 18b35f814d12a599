// The device target behind the engine's TargetModel seam (model/cuda/device_target.h): its
// forward against the CPU model's on the same packed batches, and the engine on the device target
// against plain greedy decoding on the device target — speculative output must be lossless on
// the device too. Every test skips where no CUDA device is usable.
//
// Ties: the device rounds every GEMM input to BF16. The same row computed inside two different
// batches (plain decoding: one row; verification: a packed block) can differ in f32 accumulation
// order, so a greedy choice is a device tie when its top two logits are within
// testing::kBf16DeviceTieTolerance (model/logit_bounds.h says why); outputs may diverge only
// there, and SameGreedyOutputUpToTies checks that every divergence is such a tie and counts them.

#include "model/cuda/device_target.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "cuda/device_model_test_util.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "engine/planted_drafter.h"
#include "model/cuda/device_drafter.h"
#include "model/cuda/device_drafter_host.h"
#include "model/greedy_decode.h"
#include "model/logit_bounds.h"
#include "model/random_checkpoint.h"
#include "support/tiny_models.h"

namespace dscale {
namespace {

using testing::CudaTest;
using testing::EngineRun;

class DeviceTargetTest : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    const DecoderConfig config = testing::EngineTestTargetConfig();
    host_.emplace(config, RandomDecoderWeights(config, 5, DType::kBF16));
    Result<std::unique_ptr<cuda::DeviceTarget>> device = cuda::DeviceTarget::Upload(*host_);
    ASSERT_TRUE(device.ok()) << device.status().message();
    device_ = std::move(device).value();
  }

  std::vector<std::vector<int32_t>> Prompts(int count, uint32_t seed) const {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<size_t> length(3, 40);
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < count; ++i) {
      // Below the mask and EOS ids at the top of the vocabulary.
      prompts.push_back(testing::RandomTokens(rng, length(rng), host_->config().vocab_size - 2));
    }
    return prompts;
  }

  std::optional<DecoderModel> host_;
  std::unique_ptr<cuda::DeviceTarget> device_;
};

// Prefill two prompts into a CPU cache and into a pages-only cache of the device target, then run
// one mixed batch (5 verification rows of one request, 1 decode row of the other) asking for
// non-consecutive logit rows and two captured layers: the device's logits and features must be
// the CPU's within the BF16 tolerance (device_model_test_util.h), in the order asked for.
TEST_F(DeviceTargetTest, ForwardMatchesCpuModelOnAMixedBatch) {
  ASSERT_EQ(device_->KvShape(16, 4).num_layers, 0) << "the host cache keeps pages only";
  const std::vector<std::vector<int32_t>> prompts = Prompts(2, 11);
  const std::vector<int32_t> capture = {0, 2};
  PagedKvCache cpu_cache(host_->KvShape(16, 16).WithDtype(KvDtype::kF32));
  PagedKvCache device_cache(device_->KvShape(16, 16));
  std::vector<int32_t> cpu_seqs, device_seqs;
  for (const auto& prompt : prompts) {
    for (auto [cache, seqs] : {std::pair{&cpu_cache, &cpu_seqs}, {&device_cache, &device_seqs}}) {
      seqs->push_back(cache->AddSequence());
      ASSERT_TRUE(cache->Reserve(seqs->back(), static_cast<int32_t>(prompt.size()) + 8).ok());
    }
  }
  auto run = [&](TargetModel& model, PagedKvCache& cache, const std::vector<int32_t>& seqs) {
    StepBatch prefill;
    for (size_t i = 0; i < prompts.size(); ++i) {
      AddRequestRows(prefill, seqs[i], 0, prompts[i], cache, /*all_logits=*/false);
    }
    ForwardOutput out;
    EXPECT_TRUE(model.Forward(prefill, cache, &out).ok());
    StepBatch mixed;
    const std::vector<int32_t> block = {3, 7, 9, 1, 4};
    const std::vector<int32_t> one = {6};
    AddRequestRows(mixed, seqs[0], static_cast<int32_t>(prompts[0].size()), block, cache, true);
    AddRequestRows(mixed, seqs[1], static_cast<int32_t>(prompts[1].size()), one, cache, true);
    const std::vector<int32_t> logit_rows = {5, 0, 2, 3};  // out of order and with a gap
    std::copy(logit_rows.begin(), logit_rows.end(), mixed.logit_row_storage().begin());
    mixed.SetLive(mixed.rows(), mixed.num_spans(), static_cast<int32_t>(logit_rows.size()));
    mixed.tile_rows = 16;
    mixed.capture_layers = capture;
    EXPECT_TRUE(model.Forward(mixed, cache, &out).ok());
    return out;
  };
  const ForwardOutput want = run(*host_, cpu_cache, cpu_seqs);
  const ForwardOutput got = run(*device_, device_cache, device_seqs);
  testing::ExpectWithinBf16Tolerance(got.logits, want.logits, "logits");
  testing::ExpectWithinBf16Tolerance(got.features, want.features, "captured features");
}

// Bad tokens and capture layers are the same CHECK failures as on the CPU.
TEST_F(DeviceTargetTest, ChecksPreconditionsLikeTheCpuModel) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  PagedKvCache cache(device_->KvShape(16, 2));
  const int32_t seq = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(seq, 4).ok());
  StepBatch batch;
  const std::vector<int32_t> tokens = {1, 2, static_cast<int32_t>(host_->config().vocab_size)};
  AddRequestRows(batch, seq, 0, tokens, cache, false);
  ForwardOutput out;
  EXPECT_DEATH(static_cast<void>(device_->Forward(batch, cache, &out)),
               "token outside the vocabulary");
  batch.token_storage()[2] = 3;
  batch.capture_layers = {7};
  EXPECT_DEATH(static_cast<void>(device_->Forward(batch, cache, &out)), "capture layer outside");
}

// The engine on the device target, in every length policy at c = 1 and c = 8, against plain
// greedy decoding on the same device target. Drafts come from the planted-error drafter (the
// CPU model's greedy continuation with one wrong token per step, so every accepted length
// occurs); divergences are allowed only at device float-noise ties (see the top of this file),
// at most two prompts per run.
TEST_F(DeviceTargetTest, EngineOutputIsPlainGreedyOutputOnTheDevice) {
  const std::vector<std::vector<int32_t>> prompts = Prompts(24, 3);
  const auto& eos = host_->config().eos_token_ids;
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) {
    expected.push_back(GreedyDecode(*device_, p, {.max_new_tokens = 24, .stop_ids = eos}).value());
  }
  testing::PlantedDrafter planted(*host_, 16, /*salt=*/21);
  const dvl::Predictor predictor =
      testing::RandomPredictor(host_->config().hidden_size, host_->config().vocab_size, /*seed=*/4);
  for (const std::string mode : {"none", "dflash", "fixed:7", "dscale"}) {
    for (const int32_t c : {1, 8}) {
      const EngineConfig config{.policy = LengthPolicy::Parse(mode).value(),
                                .max_running = c,
                                .inputs = {.predictor = &predictor}};
      const EngineRun run = testing::RunPrompts(*device_, &planted, config, prompts,
                                                {.max_tokens = 24, .stop_ids = eos});
      int ties = 0;
      for (size_t i = 0; i < prompts.size(); ++i) {
        testing::SameGreedyOutputUpToTies(*device_, prompts[i], run.outputs[i], expected[i], &ties,
                                          testing::kBf16DeviceTieTolerance);
      }
      EXPECT_LE(ties, 2) << mode << " c=" << c;
      EXPECT_EQ(run.free_pages_after, run.total_pages) << mode;
      if (mode != "none") {
        EXPECT_GT(run.stats.tau(), 1.5) << mode << ": drafts were accepted";
      }
    }
  }
}

// Target and drafter both on the device, as `--device cuda` runs them: the device DFlash drafter
// (random weights, so few drafts pass) through its host adapter, in dflash and dscale at c = 5
// (the adapter's chunking: 2 requests per draft call, 24 context rows per append), twice with
// two engines (each binds a fresh draft cache). Output equals plain greedy decoding on the
// device up to stated ties.
TEST_F(DeviceTargetTest, EngineWithTheDeviceDrafterIsLossless) {
  const std::vector<std::vector<int32_t>> prompts = Prompts(10, 12);
  const auto& eos = host_->config().eos_token_ids;
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) {
    expected.push_back(GreedyDecode(*device_, p, {.max_new_tokens = 20, .stop_ids = eos}).value());
  }
  const std::unique_ptr<DFlashDrafter> host_drafter = testing::RandomDrafter(*host_, 9);
  cuda::DeviceDFlashDrafter drafter(
      host_drafter->config(),
      cuda::UploadDFlashWeights(host_drafter->config(), host_drafter->weights()), device_->model(),
      device_->KvShape(16, 1));
  cuda::DeviceDrafterHost adapter(drafter, /*max_requests=*/2, /*max_context_rows=*/24, stream_);
  const dvl::Predictor predictor =
      testing::RandomPredictor(host_->config().hidden_size, host_->config().vocab_size, /*seed=*/6);
  for (const std::string mode : {"dflash", "dscale", "dflash"}) {
    const EngineConfig config{.policy = LengthPolicy::Parse(mode).value(),
                              .max_running = 5,
                              .inputs = {.predictor = &predictor}};
    const EngineRun run = testing::RunPrompts(*device_, &adapter, config, prompts,
                                              {.max_tokens = 20, .stop_ids = eos});
    int ties = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      testing::SameGreedyOutputUpToTies(*device_, prompts[i], run.outputs[i], expected[i], &ties,
                                        testing::kBf16DeviceTieTolerance);
    }
    EXPECT_LE(ties, 1) << mode;
    EXPECT_EQ(run.free_pages_after, run.total_pages) << mode;
  }
}

// A second engine (a new host cache) on the same device target re-binds the device rows and
// computes exactly what the first did.
TEST_F(DeviceTargetTest, ASecondEngineOnTheSameTargetRepeatsTheFirst) {
  const std::vector<std::vector<int32_t>> prompts = Prompts(6, 8);
  testing::PlantedDrafter planted(*host_, 16, /*salt=*/5);
  const EngineConfig config{.policy = LengthPolicy::Parse("dflash").value(), .max_running = 4};
  const GenerationParams params{.max_tokens = 16, .stop_ids = host_->config().eos_token_ids};
  const EngineRun first = testing::RunPrompts(*device_, &planted, config, prompts, params);
  const EngineRun second = testing::RunPrompts(*device_, &planted, config, prompts, params);
  EXPECT_EQ(first.outputs, second.outputs);
}

}  // namespace
}  // namespace dscale
