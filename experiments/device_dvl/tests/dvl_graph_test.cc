// The DVL decision pipeline (features → MLP → allocator → pack) captured into a CUDA graph for
// one bucket and replayed for several steps, against eager execution of the same launches.
// Every test skips where no CUDA device is usable.
//
// No kernel of the pipeline uses atomics or any other order-dependent reduction, so a replay
// must give the same bits as an eager run on the same inputs, and it must allocate nothing. Each
// step writes new inputs into the bucket's fixed addresses (with a different live count, hence a
// different budget, which the kernels read from device memory), and the outputs are overwritten
// with 0xff bytes before each run so that a stage that silently did nothing cannot pass.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "core/dvl_shapes.h"
#include "cuda/cuda_test_util.h"
#include "cuda/dvl_test_util.h"
#include "device_dvl/dvl_decision.h"
#include "device_dvl/dvl_features.h"
#include "dvl/budget_allocator.h"
#include "dvl/flat_pack.h"
#include "kernels/cuda/graph.h"
#include "kernels/kernel_test_util.h"

namespace dscale {
namespace {

using dvl::kBlockWidth;
using dvl::kDraftPositions;
using dvl::kFeatureCount;
using testing::CudaTest;
using testing::DevicePredictor;
using testing::RandomNormal;
using testing::RandomNormalisedPredictor;
using testing::SameBits;

constexpr int64_t kHidden = 256;
constexpr int64_t kVocab = 4160;

// One step's inputs for a bucket: values for every bucket row (rows past N are junk the
// pipeline must not depend on).
struct StepInputs {
  cuda::DvlStep step;
  std::vector<float> logits;                         // [N_bs, 15, V]
  std::vector<float> hidden;                         // [N_bs, 15, H]
  std::vector<int32_t> tokens, positions, kv_slots;  // [N_bs, W]
};

StepInputs RandomStep(std::mt19937& rng, int32_t bucket, int32_t live_count) {
  StepInputs in;
  in.step = {.live_count = live_count,
             .budget = static_cast<int32_t>(
                 *dvl::BudgetFromFraction(live_count, kBlockWidth, dvl::kDefaultVerifyBudget))};
  in.logits = RandomNormal(rng, bucket * kDraftPositions * kVocab, -1.0f, 3.0f);
  in.hidden = RandomNormal(rng, bucket * kDraftPositions * kHidden, 0.0f, 1.0f);
  std::uniform_int_distribution<int32_t> token(0, kVocab - 1);
  for (int32_t i = 0; i < bucket; ++i) {
    for (int j = 0; j < kBlockWidth; ++j) {
      in.tokens.push_back(token(rng));
      in.positions.push_back(100 * i + j);
      in.kv_slots.push_back(5000 + 64 * i + j);
    }
  }
  return in;
}

// The fixed-address device buffers of one bucket.
class BucketBuffers {
 public:
  BucketBuffers(const cuda::DvlDecisionShape& shape, const DevicePredictor& predictor)
      : shape_(shape),
        step_(1),
        logits_(Count(kDraftPositions * shape.vocab_size)),
        hidden_(Count(kDraftPositions * shape.hidden_size)),
        tokens_(Count(kBlockWidth)),
        positions_(Count(kBlockWidth)),
        kv_slots_(Count(kBlockWidth)),
        scratch_(static_cast<size_t>(
            cuda::FeatureScratchFloats(shape.bucket, shape.hidden_size, shape.vocab_size))),
        features_(Count(kFeatureCount)),
        pred_logits_(Count(kDraftPositions)),
        scores_(Count(kBlockWidth)),
        seed_(Count(1)),
        updates_(1),
        packed_tokens_(static_cast<size_t>(shape.capacity)),
        packed_positions_(static_cast<size_t>(shape.capacity)),
        packed_kv_(static_cast<size_t>(shape.capacity)),
        k_(Count(1)),
        offsets_(Count(1) + 1) {
    view_ = {.step = step_.data(),
             .draft_logits = logits_.data(),
             .draft_hidden = hidden_.data(),
             .block_tokens = tokens_.data(),
             .block_positions = positions_.data(),
             .block_kv_slots = kv_slots_.data(),
             .projections = predictor.projections(),
             .predictor = predictor.weights(),
             .feature_scratch = scratch_.data(),
             .features = features_.data(),
             .pred_logits = pred_logits_.data(),
             .scores = scores_.data(),
             .seed = seed_.data(),
             .updates = updates_.data(),
             .packed = {.tokens = packed_tokens_.data(),
                        .positions = packed_positions_.data(),
                        .kv_slots = packed_kv_.data(),
                        .k = k_.data(),
                        .offsets = offsets_.data()}};
  }

  const cuda::DvlDecisionBuffers& view() const { return view_; }

  // Copies a step's inputs into the fixed addresses, queued on `stream`.
  void Stage(const StepInputs& in, cudaStream_t stream) {
    CopyAsync(step_, &in.step, 1, stream);
    CopyAsync(logits_, in.logits.data(), in.logits.size(), stream);
    CopyAsync(hidden_, in.hidden.data(), in.hidden.size(), stream);
    CopyAsync(tokens_, in.tokens.data(), in.tokens.size(), stream);
    CopyAsync(positions_, in.positions.data(), in.positions.size(), stream);
    CopyAsync(kv_slots_, in.kv_slots.data(), in.kv_slots.size(), stream);
  }

  // Fills every output and intermediate with 0xff bytes, queued on `stream`.
  void Poison(cudaStream_t stream) {
    PoisonAsync(features_, stream);
    PoisonAsync(pred_logits_, stream);
    PoisonAsync(scores_, stream);
    PoisonAsync(seed_, stream);
    PoisonAsync(updates_, stream);
    PoisonAsync(packed_tokens_, stream);
    PoisonAsync(packed_positions_, stream);
    PoisonAsync(packed_kv_, stream);
    PoisonAsync(k_, stream);
    PoisonAsync(offsets_, stream);
  }

  const cuda::DeviceBuffer<float>& features() const { return features_; }
  const cuda::DeviceBuffer<float>& pred_logits() const { return pred_logits_; }
  const cuda::DeviceBuffer<float>& scores() const { return scores_; }
  const cuda::DeviceBuffer<int32_t>& seed() const { return seed_; }
  const cuda::DeviceBuffer<int32_t>& updates() const { return updates_; }
  const cuda::DeviceBuffer<int32_t>& packed_tokens() const { return packed_tokens_; }
  const cuda::DeviceBuffer<int32_t>& packed_positions() const { return packed_positions_; }
  const cuda::DeviceBuffer<int32_t>& packed_kv() const { return packed_kv_; }
  const cuda::DeviceBuffer<int32_t>& k() const { return k_; }
  const cuda::DeviceBuffer<int32_t>& offsets() const { return offsets_; }

 private:
  size_t Count(int64_t per_request) const {
    return static_cast<size_t>(shape_.bucket * per_request);
  }
  template <typename T>
  static void CopyAsync(cuda::DeviceBuffer<T>& to, const T* from, size_t count,
                        cudaStream_t stream) {
    ASSERT_EQ(count, to.size());
    DSCALE_CUDA_CHECK(
        cudaMemcpyAsync(to.data(), from, count * sizeof(T), cudaMemcpyHostToDevice, stream));
  }
  template <typename T>
  static void PoisonAsync(cuda::DeviceBuffer<T>& buffer, cudaStream_t stream) {
    DSCALE_CUDA_CHECK(cudaMemsetAsync(buffer.data(), 0xff, buffer.bytes(), stream));
  }

  cuda::DvlDecisionShape shape_;
  cuda::DeviceBuffer<cuda::DvlStep> step_;
  cuda::DeviceBuffer<float> logits_, hidden_;
  cuda::DeviceBuffer<int32_t> tokens_, positions_, kv_slots_;
  cuda::DeviceBuffer<float> scratch_, features_, pred_logits_, scores_;
  cuda::DeviceBuffer<int32_t> seed_, updates_;
  cuda::DeviceBuffer<int32_t> packed_tokens_, packed_positions_, packed_kv_, k_, offsets_;
  cuda::DvlDecisionBuffers view_;
};

// What one run of the pipeline produced: the live rows of the intermediates, and the whole
// packed workspace.
struct DecisionOutputs {
  std::vector<float> features, pred_logits, scores;
  std::vector<int32_t> seed, updates, tokens, positions, kv_slots, k, offsets;
};

class CudaDvlGraphTest : public CudaTest {
 protected:
  template <typename T>
  std::vector<T> Live(const cuda::DeviceBuffer<T>& buffer, int64_t per_request, int32_t n) {
    std::vector<T> all = ToHost(buffer);
    all.resize(static_cast<size_t>(n * per_request));
    return all;
  }

  DecisionOutputs Read(const BucketBuffers& b, int32_t n) {
    DecisionOutputs out;
    out.features = Live(b.features(), kFeatureCount, n);
    out.pred_logits = Live(b.pred_logits(), kDraftPositions, n);
    out.scores = Live(b.scores(), kBlockWidth, n);
    out.seed = Live(b.seed(), 1, n);
    out.updates = ToHost(b.updates());
    out.tokens = ToHost(b.packed_tokens());
    out.positions = ToHost(b.packed_positions());
    out.kv_slots = ToHost(b.packed_kv());
    out.k = ToHost(b.k());
    out.offsets = ToHost(b.offsets());
    return out;
  }

  void ExpectSameBits(const DecisionOutputs& replay, const DecisionOutputs& eager) {
    EXPECT_TRUE(SameBits(replay.features, eager.features)) << "features";
    EXPECT_TRUE(SameBits(replay.pred_logits, eager.pred_logits)) << "predictor logits";
    EXPECT_TRUE(SameBits(replay.scores, eager.scores)) << "prefix scores";
    EXPECT_EQ(replay.seed, eager.seed);
    EXPECT_EQ(replay.updates, eager.updates);
    EXPECT_EQ(replay.tokens, eager.tokens);
    EXPECT_EQ(replay.positions, eager.positions);
    EXPECT_EQ(replay.kv_slots, eager.kv_slots);
    EXPECT_EQ(replay.k, eager.k);
    EXPECT_EQ(replay.offsets, eager.offsets);
  }

  // The high-water mark of device memory this process's graphs have allocated. Device-wide
  // free memory would not do: ctest runs test processes side by side on one device.
  uint64_t GraphMemoryHighWater() {
    DSCALE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    int device = 0;
    DSCALE_CUDA_CHECK(cudaGetDevice(&device));
    uint64_t bytes = 0;
    DSCALE_CUDA_CHECK(cudaDeviceGetGraphMemAttribute(device, cudaGraphMemAttrUsedMemHigh, &bytes));
    return bytes;
  }
};

// The decision is a real allocation: Σ k over the live requests is the budget, every live length
// is in [1, W], and the requests past N are sentinels.
void ExpectWellFormedDecision(const DecisionOutputs& out, const cuda::DvlStep& step,
                              int32_t bucket) {
  int64_t total = 0;
  for (int32_t i = 0; i < bucket; ++i) {
    if (i < step.live_count) {
      EXPECT_GE(out.k[i], 1);
      EXPECT_LE(out.k[i], kBlockWidth);
      total += out.k[i];
    } else {
      EXPECT_EQ(out.k[i], 0) << "sentinel " << i;
      EXPECT_EQ(out.offsets[i + 1], step.budget) << "sentinel " << i;
    }
  }
  EXPECT_EQ(total, step.budget);
}

TEST_F(CudaDvlGraphTest, ReplayForThreeStepsEqualsEagerBitwiseWithoutAllocating) {
  dvl::BucketConfig config;
  const int32_t bucket = 8;
  const cuda::DvlDecisionShape shape{.bucket = bucket,
                                     .capacity = dvl::BucketCapacity(config, bucket),
                                     .hidden_size = kHidden,
                                     .vocab_size = kVocab};
  const dvl::Predictor predictor = RandomNormalisedPredictor(kHidden, kVocab, 11);
  const DevicePredictor device_predictor(predictor);
  BucketBuffers buffers(shape, device_predictor);
  const auto enqueue = [&](cudaStream_t s) { cuda::EnqueueDvlDecision(shape, buffers.view(), s); };

  std::mt19937 rng(601);
  std::vector<StepInputs> steps;
  for (const int32_t live : {8, 5, 1}) steps.push_back(RandomStep(rng, bucket, live));

  // One eager run first: it loads the kernels before the capture.
  buffers.Stage(steps[0], stream_);
  enqueue(stream_);
  DSCALE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  const cuda::CapturedGraph graph = cuda::CapturedGraph::Capture(stream_, enqueue);
  // Kernel nodes only: nothing in the graph can allocate (Capture also rejects allocation
  // nodes, and its capture mode fails a cudaMalloc on this thread).
  EXPECT_GT(graph.kernel_nodes(), 0);
  EXPECT_EQ(graph.nodes(), graph.kernel_nodes()) << "the decision should be kernels only";
  for (const StepInputs& in : steps) {
    SCOPED_TRACE(::testing::Message() << "live count " << in.step.live_count);
    buffers.Poison(stream_);
    buffers.Stage(in, stream_);
    enqueue(stream_);
    const DecisionOutputs eager = Read(buffers, in.step.live_count);
    ExpectWellFormedDecision(eager, in.step, bucket);

    buffers.Poison(stream_);
    buffers.Stage(in, stream_);
    graph.Replay(stream_);
    ExpectSameBits(Read(buffers, in.step.live_count), eager);
  }
  EXPECT_EQ(GraphMemoryHighWater(), 0u) << "a replay allocated device memory";
}

// The cache captures each bucket once (the enqueue callable runs only while capturing) and
// replays it on every later step.
TEST_F(CudaDvlGraphTest, GraphCacheCapturesEachBucketOnce) {
  dvl::BucketConfig config;
  const dvl::Predictor predictor = RandomNormalisedPredictor(kHidden, kVocab, 12);
  const DevicePredictor device_predictor(predictor);
  std::mt19937 rng(602);
  // Each bucket's buffers live as long as the cache, like a workspace pool's.
  std::vector<std::unique_ptr<BucketBuffers>> workspaces;
  cuda::GraphCache cache;
  int captures = 0;
  for (const int32_t bucket : {4, 8}) {
    const cuda::DvlDecisionShape shape{.bucket = bucket,
                                       .capacity = dvl::BucketCapacity(config, bucket),
                                       .hidden_size = kHidden,
                                       .vocab_size = kVocab};
    workspaces.push_back(std::make_unique<BucketBuffers>(shape, device_predictor));
    BucketBuffers& buffers = *workspaces.back();
    const cuda::DvlDecisionBuffers view = buffers.view();
    const auto enqueue = [&captures, shape, view](cudaStream_t s) {
      ++captures;
      cuda::EnqueueDvlDecision(shape, view, s);
    };
    // Eager first (loads the kernels), then three steps through the cache.
    buffers.Stage(RandomStep(rng, bucket, bucket), stream_);
    cuda::EnqueueDvlDecision(shape, view, stream_);
    for (const int32_t live : {bucket, bucket - 1, 1}) {
      SCOPED_TRACE(::testing::Message() << "bucket " << bucket << " live count " << live);
      const StepInputs in = RandomStep(rng, bucket, live);
      buffers.Poison(stream_);
      buffers.Stage(in, stream_);
      cache.Run(bucket, stream_, enqueue);
      ExpectWellFormedDecision(Read(buffers, live), in.step, bucket);
    }
    EXPECT_NE(cache.Find(bucket), nullptr);
  }
  EXPECT_EQ(captures, 2);
  EXPECT_EQ(cache.size(), 2);
  EXPECT_EQ(cache.Find(1), nullptr);
}

}  // namespace
}  // namespace dscale
