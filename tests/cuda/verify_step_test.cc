// The verification step on a bucket's fixed-address workspace (model/cuda/verify_step.h): its
// logits against DecoderModel::Forward on the same live rows, its acceptance and committed tokens
// against VerifyGreedy on the device's own logits, and a captured graph replayed for several
// steps with new inputs, bit for bit equal to eager execution. Steps are packed by the CPU's
// dvl::Pack from allocations of dvl::Allocate, so the workspace sees exactly what the packer
// hands it (sentinels and tail placeholders included). Every test skips where no CUDA device is
// usable.

#include "model/cuda/verify_step.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "cuda/device_model_test_util.h"
#include "cuda/dvl_test_util.h"
#include "dvl/budget_allocator.h"
#include "dvl/flat_pack.h"
#include "kernels/cuda/graph.h"
#include "model/greedy_decode.h"
#include "spec/prefix_verifier.h"

namespace dscale {
namespace {

using testing::CopyFloats;
using testing::CudaTest;
using testing::RandomTokens;
using testing::TwinModels;

constexpr int kWidth = dvl::kBlockWidth;
constexpr int32_t kBucket = 4;
constexpr int32_t kPagesPerRequest = 4;  // 64 positions: the longest prompt plus one block

// The prompts every test prefills, one per bucket request.
const std::vector<int32_t> kPromptLens = {24, 9, 31, 17};

// One step as the packer produced it, and what the host knows about it.
struct PackedStep {
  std::unique_ptr<dvl::BucketStep> packed;
  int32_t live_count = 0;
  std::vector<int32_t> planned;  // per live request: drafts that follow the greedy path

  const StepBatch& batch() const { return packed->batch(); }
  std::span<const int32_t> tokens() const { return packed->batch().token_storage(); }
  std::span<const int32_t> k() const { return packed->k(); }
  std::span<const int32_t> offsets() const { return packed->offsets(); }
};

class CudaVerifyStepTest : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    models_ = std::make_unique<TwinModels>(testing::TinyDeviceConfig(), 51, 64);
    std::mt19937 rng(501);
    for (const int32_t len : kPromptLens) {
      prompts_.push_back(RandomTokens(rng, static_cast<size_t>(len), vocab()));
    }
    seqs_ = testing::PrefillBoth(*models_, prompts_, stream_);
    for (size_t i = 0; i < seqs_.size(); ++i) {
      ASSERT_TRUE(models_->cpu_cache.Reserve(seqs_[i], kPromptLens[i] + kWidth).ok());
    }
  }

  int64_t vocab() const { return models_->cpu.config().vocab_size; }

  // The greedy continuation of request i's prompt followed by `anchor`, from the CPU model
  // alone (its own cache).
  std::vector<int32_t> GreedyAfter(size_t i, int32_t anchor) {
    std::vector<int32_t> prompt = prompts_[i];
    prompt.push_back(anchor);
    auto tokens = GreedyDecode(models_->cpu, prompt, {.max_new_tokens = kWidth - 1});
    EXPECT_TRUE(tokens.ok());
    return *tokens;
  }

  // A step with `live` requests: request i's block is [anchor, its first planned_i greedy
  // tokens, one wrong token, random tokens]; lengths from the budget allocator on random
  // acceptance probabilities, at budget W·N/2; packed into a bucket of `capacity` rows.
  PackedStep MakeStep(std::mt19937& rng, int32_t live, int64_t capacity, bool full_width) {
    PackedStep step;
    step.live_count = live;
    std::uniform_int_distribution<int32_t> planned(0, kWidth - 1);
    StepBatch blocks;
    for (int32_t i = 0; i < live; ++i) {
      const int32_t anchor = RandomTokens(rng, 1, vocab())[0];
      const std::vector<int32_t> greedy = GreedyAfter(static_cast<size_t>(i), anchor);
      const int32_t p = planned(rng);
      step.planned.push_back(p);
      std::vector<int32_t> block = RandomTokens(rng, kWidth, vocab());
      block[0] = anchor;
      for (int32_t j = 0; j < p; ++j) block[1 + j] = greedy[j];
      if (p + 1 < kWidth) block[1 + p] = (greedy[p] + 1) % static_cast<int32_t>(vocab());
      AddRequestRows(blocks, seqs_[i], kPromptLens[i], block, models_->cpu_cache,
                     /*all_logits=*/false);
    }
    std::vector<int32_t> k(static_cast<size_t>(live), kWidth);
    if (!full_width) {
      std::uniform_real_distribution<float> prob(0.05f, 0.95f);
      std::vector<float> probs(static_cast<size_t>(live) * (kWidth - 1));
      for (float& v : probs) v = prob(rng);
      const int64_t budget = *dvl::BudgetFromFraction(live, kWidth, dvl::kDefaultVerifyBudget);
      k = dvl::AllocateFromProbs(probs.data(), live, budget)->k;
    }
    step.packed = std::make_unique<dvl::BucketStep>(kBucket, capacity);
    const Status status = dvl::Pack(blocks, k, step.packed.get());
    EXPECT_TRUE(status.ok()) << status.ToString();
    return step;
  }

  cuda::VerifyShape Shape(int64_t capacity, int tile_rows,
                          std::vector<int32_t> capture_layers = {}) const {
    return {.bucket = kBucket,
            .capacity = capacity,
            .width = kWidth,
            .pages_per_request = kPagesPerRequest,
            .page_size = testing::kPageSize,
            .tile_rows = tile_rows,
            .capture_layers = std::move(capture_layers)};
  }

  // The CPU forward over the step's live rows, request by request as the engine batches them.
  std::vector<float> CpuLogitsOfLiveRows(const PackedStep& step) {
    return CpuForwardOfLiveRows(step, {}).logits;
  }
  ForwardOutput CpuForwardOfLiveRows(const PackedStep& step, std::vector<int32_t> capture) {
    StepBatch batch;
    for (int32_t i = 0; i < step.live_count; ++i) {
      AddRequestRows(batch, seqs_[i], kPromptLens[i],
                     step.tokens().subspan(step.offsets()[i], step.k()[i]), models_->cpu_cache,
                     /*all_logits=*/true);
    }
    batch.tile_rows = 16;
    batch.capture_layers = std::move(capture);
    ForwardOutput out;
    EXPECT_TRUE(models_->cpu.Forward(batch, models_->cpu_cache, &out).ok());
    return out;
  }

  // The K rows of every layer at `slot`, device and CPU.
  void ExpectKvRowMatchesCpu(int64_t slot) {
    const int64_t row = models_->device_cache.row_floats();
    for (int32_t layer = 0; layer < models_->cpu.config().num_hidden_layers; ++layer) {
      const float* cpu_k = models_->cpu_cache.Layer(layer).k + slot * row;
      const std::vector<float> device_k = CopyFloats(models_->device_cache.k(layer) + slot * row,
                                                     static_cast<size_t>(row), stream_);
      testing::ExpectWithinBf16Tolerance(device_k, std::vector<float>(cpu_k, cpu_k + row),
                                         "K row of request 0's anchor");
    }
  }

  std::unique_ptr<TwinModels> models_;
  std::vector<std::vector<int32_t>> prompts_;
  std::vector<int32_t> seqs_;
};

// Acceptance and the committed tokens, exactly as VerifyGreedy computes them on the device's
// logits (the argmax tie rule is the same on both sides).
void ExpectResultsFollowVerifyGreedy(const PackedStep& step, const std::vector<float>& logits,
                                     int64_t vocab, const cuda::VerifyResults& got) {
  for (int32_t i = 0; i < kBucket; ++i) {
    SCOPED_TRACE(::testing::Message() << "request " << i);
    if (i >= step.live_count) {
      EXPECT_EQ(got.accepted[i], 0);
      EXPECT_EQ(got.next_token[i], -1);
      EXPECT_EQ(got.committed[i], 0);
      for (int j = 0; j < kWidth; ++j) EXPECT_EQ(got.tokens[i * kWidth + j], -1);
      continue;
    }
    const int32_t first = step.offsets()[i];
    const int32_t k = step.k()[i];
    const VerifyResult want =
        VerifyGreedy(std::span(logits).subspan(static_cast<size_t>(first * vocab),
                                               static_cast<size_t>(k * vocab)),
                     vocab, step.tokens().subspan(first + 1, k - 1));
    EXPECT_EQ(got.accepted[i], want.accepted);
    EXPECT_EQ(got.next_token[i], want.next_token);
    EXPECT_EQ(got.committed[i], want.accepted + 1);
    for (int j = 0; j < kWidth; ++j) {
      const int32_t expected = j < want.accepted    ? step.tokens()[first + 1 + j]
                               : j == want.accepted ? want.next_token
                                                    : -1;
      EXPECT_EQ(got.tokens[i * kWidth + j], expected) << "column " << j;
    }
  }
}

// Drafts that follow the CPU's greedy path are accepted up to the planned count (or the
// allocated length). Float noise is allowed for explicitly: a row whose CPU top-two logits are
// closer than twice the row's largest device/CPU difference is a near-tie, where the device may
// pick either token. Rows before the first near-tie have the CPU's greedy token on the device
// too, so acceptance reaches at least that row; without a near-tie it is exactly the plan.
void ExpectPlannedAcceptance(const PackedStep& step, const std::vector<float>& device_logits,
                             const std::vector<float>& cpu_logits, int64_t vocab,
                             const cuda::VerifyResults& got) {
  for (int32_t i = 0; i < step.live_count; ++i) {
    SCOPED_TRACE(::testing::Message() << "request " << i);
    const int32_t want = std::min(step.planned[i], step.k()[i] - 1);
    int32_t first_near_tie = -1;
    for (int32_t j = 0; j <= want && first_near_tie < 0; ++j) {
      // The CPU's rows are the live rows in packed order: request i's start at offsets[i].
      const int64_t row = step.offsets()[i] + j;
      const double noise = testing::RowError(device_logits, cpu_logits, row, vocab);
      if (testing::TopOf(cpu_logits.data() + row * vocab, vocab).margin <= 2.0 * noise) {
        first_near_tie = j;
      }
    }
    if (first_near_tie < 0) {
      EXPECT_EQ(got.accepted[i], want);
    } else {
      EXPECT_GE(got.accepted[i], first_near_tie) << "near-tie at row " << first_near_tie;
    }
  }
}

TEST_F(CudaVerifyStepTest, PackedStepMatchesCpuForwardAndVerifyGreedy) {
  const int64_t capacity = dvl::BucketCapacity(dvl::BucketConfig{}, kBucket);  // W·N_bs/2
  cuda::VerifyWorkspace ws(Shape(capacity, 16), models_->device);
  std::mt19937 rng(502);
  // N = 3 of 4: one sentinel and M_bs − M_live = 8 tail rows carrying request 0's anchor slot.
  const PackedStep step = MakeStep(rng, 3, capacity, /*full_width=*/false);
  ws.Stage(step.batch(), stream_);
  cuda::EnqueueVerifyStep(models_->device, models_->device_cache, ws, stream_);
  const cuda::VerifyResults got = ws.ReadResults(stream_);

  const int32_t live_rows = step.offsets()[kBucket];
  const std::vector<float> device_logits =
      CopyFloats(ws.logits(), static_cast<size_t>(live_rows * vocab()), stream_);
  const std::vector<float> cpu_logits = CpuLogitsOfLiveRows(step);
  testing::ExpectWithinBf16Tolerance(device_logits, cpu_logits, "live-row logits");
  ExpectResultsFollowVerifyGreedy(step, device_logits, vocab(), got);
  ExpectPlannedAcceptance(step, device_logits, cpu_logits, vocab(), got);
  // The tail rows' placeholder slot is request 0's anchor slot: had their K/V been stored, it
  // would hold token 0 at position 0 instead of the anchor's.
  ExpectKvRowMatchesCpu(step.batch().kv_slots()[0]);
}

// The residual streams the drafter's context append needs (layers {0, last}, in that order) are
// captured for every live packed row as the CPU forward captures them.
TEST_F(CudaVerifyStepTest, CapturesTheDrafterFeaturesOfEveryLiveRow) {
  const int64_t capacity = dvl::BucketCapacity(dvl::BucketConfig{}, kBucket);
  const int32_t last = static_cast<int32_t>(models_->cpu.config().num_hidden_layers) - 1;
  const std::vector<int32_t> capture = {0, last};
  cuda::VerifyWorkspace ws(Shape(capacity, 16, capture), models_->device);
  std::mt19937 rng(505);
  const PackedStep step = MakeStep(rng, 3, capacity, /*full_width=*/false);
  ws.PoisonOutputs(stream_);
  ws.Stage(step.batch(), stream_);
  cuda::EnqueueVerifyStep(models_->device, models_->device_cache, ws, stream_);
  static_cast<void>(ws.ReadResults(stream_));
  const int64_t width = static_cast<int64_t>(capture.size()) * models_->cpu.config().hidden_size;
  const int32_t live_rows = step.offsets()[kBucket];
  const std::vector<float> device_features =
      CopyFloats(ws.features(), static_cast<size_t>(live_rows * width), stream_);
  const ForwardOutput cpu = CpuForwardOfLiveRows(step, capture);
  testing::ExpectWithinBf16Tolerance(device_features, cpu.features, "captured features");
}

TEST_F(CudaVerifyStepTest, FullWidthStepWithWideTileMatchesCpu) {
  const int64_t capacity = int64_t{kBucket} * kWidth;  // DFlash: every request verifies W rows
  cuda::VerifyWorkspace ws(Shape(capacity, 128), models_->device);
  std::mt19937 rng(503);
  const PackedStep step = MakeStep(rng, kBucket, capacity, /*full_width=*/true);
  ws.Stage(step.batch(), stream_);
  cuda::EnqueueVerifyStep(models_->device, models_->device_cache, ws, stream_);
  const cuda::VerifyResults got = ws.ReadResults(stream_);
  const std::vector<float> device_logits =
      CopyFloats(ws.logits(), static_cast<size_t>(capacity * vocab()), stream_);
  const std::vector<float> cpu_logits = CpuLogitsOfLiveRows(step);
  testing::ExpectWithinBf16Tolerance(device_logits, cpu_logits, "logits");
  ExpectResultsFollowVerifyGreedy(step, device_logits, vocab(), got);
  ExpectPlannedAcceptance(step, device_logits, cpu_logits, vocab(), got);
}

// Everything a step produces that the next step or the state commit can see.
struct StepOutputs {
  cuda::VerifyResults results;
  std::vector<float> logits;           // live rows
  std::vector<float> k_first, v_last;  // whole K of layer 0 and V of the last layer
};

TEST_F(CudaVerifyStepTest, GraphReplayEqualsEagerBitwiseOverSteps) {
  const int64_t capacity = dvl::BucketCapacity(dvl::BucketConfig{}, kBucket);
  cuda::VerifyWorkspace ws(Shape(capacity, 16), models_->device);
  const auto enqueue = [&](cudaStream_t s) {
    cuda::EnqueueVerifyStep(models_->device, models_->device_cache, ws, s);
  };
  std::mt19937 rng(504);
  std::vector<PackedStep> steps;
  for (const int32_t live : {4, 3, 1, 2}) {
    steps.push_back(MakeStep(rng, live, capacity, /*full_width=*/false));
  }
  const int32_t last_layer = static_cast<int32_t>(models_->cpu.config().num_hidden_layers) - 1;
  const size_t cache_floats =
      static_cast<size_t>(models_->device_cache.num_slots() * models_->device_cache.row_floats());
  const auto run = [&](const PackedStep& step, bool replay, const cuda::CapturedGraph* graph) {
    ws.PoisonOutputs(stream_);
    ws.Stage(step.batch(), stream_);
    if (replay) {
      graph->Replay(stream_);
    } else {
      enqueue(stream_);
    }
    StepOutputs out;
    out.results = ws.ReadResults(stream_);
    const int32_t live_rows = step.offsets()[kBucket];
    out.logits = CopyFloats(ws.logits(), static_cast<size_t>(live_rows * vocab()), stream_);
    out.k_first = CopyFloats(models_->device_cache.k(0), cache_floats, stream_);
    out.v_last = CopyFloats(models_->device_cache.v(last_layer), cache_floats, stream_);
    return out;
  };

  // One eager run first: it loads every kernel's module before the capture.
  run(steps[0], false, nullptr);
  const cuda::CapturedGraph graph = cuda::CapturedGraph::Capture(stream_, enqueue);
  EXPECT_GT(graph.kernel_nodes(), 0);
  for (const PackedStep& step : steps) {
    SCOPED_TRACE(::testing::Message() << "live count " << step.live_count);
    const StepOutputs eager = run(step, false, nullptr);
    const StepOutputs replayed = run(step, true, &graph);
    EXPECT_EQ(replayed.results.accepted, eager.results.accepted);
    EXPECT_EQ(replayed.results.next_token, eager.results.next_token);
    EXPECT_EQ(replayed.results.committed, eager.results.committed);
    EXPECT_EQ(replayed.results.tokens, eager.results.tokens);
    EXPECT_TRUE(testing::SameBits(replayed.logits, eager.logits)) << "logits";
    EXPECT_TRUE(testing::SameBits(replayed.k_first, eager.k_first)) << "layer 0 K";
    EXPECT_TRUE(testing::SameBits(replayed.v_last, eager.v_last)) << "last layer V";
  }
  int device = 0;
  DSCALE_CUDA_CHECK(cudaGetDevice(&device));
  uint64_t graph_bytes = 0;
  DSCALE_CUDA_CHECK(
      cudaDeviceGetGraphMemAttribute(device, cudaGraphMemAttrUsedMemHigh, &graph_bytes));
  EXPECT_EQ(graph_bytes, 0u) << "a replay allocated device memory";
}

}  // namespace
}  // namespace dscale
