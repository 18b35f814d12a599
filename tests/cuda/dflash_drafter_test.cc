// The device DFlash drafter against DFlashDrafter (model/dflash_drafter.h) on the same random
// BF16 target and drafter checkpoints: the draft context's K/V after AppendContext, and a
// Draft's logits, hidden vectors and candidates, for 1, 3 and 5 requests with context lengths
// that are not multiples of the page size, at tile heights 16 and 128, through the host adapter
// (DeviceDrafterHost); and a captured EnqueueDraft replayed bit for bit against eager runs.
//
// Both drafters are fed the same features (the CPU target's), so only the drafter is compared.
// Tolerances: cuda/device_model_test_util.h. They carry over unchanged: the drafter's only
// device-side difference from the CPU is again the BF16 rounding of each GEMM input (the fc's
// input features included, each moved by at most 2⁻⁸ of itself), over fewer layers (fc and two
// draft layers) than the target tests cover. Every test skips where no CUDA device is usable.

#include "model/dflash_drafter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/step_batch.h"
#include "cuda/cuda_test_util.h"
#include "cuda/device_model_test_util.h"
#include "cuda/dvl_test_util.h"
#include "kernels/cuda/graph.h"
#include "model/cuda/device_drafter.h"
#include "model/cuda/device_drafter_host.h"
#include "model/random_checkpoint.h"
#include "support/tiny_models.h"

namespace dscale {
namespace {

using testing::CopyFloats;
using testing::CudaTest;
using testing::ExpectWithinBf16Tolerance;
using testing::RandomTokens;
using testing::RowError;
using testing::TopOf;
using testing::TwinModels;

constexpr int32_t kNumPages = 64;
// Context rows a test commits after its first draft (they overwrite that draft's block K/V).
constexpr int32_t kCommitRows = 7;

// Random drafter weights already rounded to BF16, so the device upload is exact.
DFlashWeights RandomBf16DrafterWeights(const DFlashConfig& config, int64_t target_hidden,
                                       uint64_t seed) {
  std::map<std::string, std::vector<float>> by_name;
  for (TensorToWrite& t : RandomDFlashTensors(config, target_hidden, seed, DType::kBF16)) {
    by_name[t.name] = std::move(t.values);
  }
  const TensorReader read = FromF32Reader(
      [&](const std::string& name, const std::vector<int64_t>&) -> Result<std::vector<float>> {
        return by_name.at(name);
      });
  return LoadDFlashWeights(config, target_hidden, read).value();
}

// The same target and drafter on both backends, both drafters bound to the CPU cache (whose
// page tables address the device drafter's KV too).
struct TwinDrafters {
  TwinDrafters(uint64_t seed, int32_t max_requests, int32_t max_context_rows, cudaStream_t stream)
      : models(testing::TinyDeviceConfig(), seed, kNumPages),
        config(testing::TestDrafterConfig(models.cpu.config())),
        cpu(config, RandomBf16DrafterWeights(config, models.cpu.config().hidden_size, seed + 1),
            models.cpu),
        device(config, cuda::UploadDFlashWeights(config, cpu.weights()), models.device,
               models.cpu_cache.shape()),
        host(device, max_requests, max_context_rows, stream) {
    cpu.Bind(models.cpu_cache);
    host.Bind(models.cpu_cache);
  }

  PagedKvCache& cache() { return models.cpu_cache; }
  int64_t vocab() const { return models.cpu.config().vocab_size; }

  TwinModels models;
  DFlashConfig config;
  DFlashDrafter cpu;
  cuda::DeviceDFlashDrafter device;
  cuda::DeviceDrafterHost host;
};

// Requests with committed contexts; `tokens` owns what each request's `committed` views.
struct Contexts {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<DraftRequest> requests;
  std::vector<int32_t> slots;  // every slot AppendContext wrote
};

class CudaDFlashDrafterTest : public CudaTest {
 protected:
  // Runs rows [from, from + new_tokens) of each sequence through the CPU target with the
  // drafter's feature layers captured, and appends their features to both drafters.
  void AppendBoth(TwinDrafters& d, const std::vector<int32_t>& seqs,
                  const std::vector<int32_t>& from,
                  const std::vector<std::vector<int32_t>>& new_tokens, Contexts* contexts) {
    StepBatch batch;
    for (size_t i = 0; i < seqs.size(); ++i) {
      AddRequestRows(batch, seqs[i], from[i], new_tokens[i], d.cache(), /*all_logits=*/false);
    }
    ForwardOutput out;
    batch.capture_layers = d.config.target_layer_ids;
    ASSERT_TRUE(d.models.cpu.Forward(batch, d.cache(), &out).ok());
    const ContextRows rows{
        .features = out.features, .positions = batch.positions(), .slots = batch.kv_slots()};
    d.cpu.AppendContext(rows);
    d.host.AppendContext(rows);
    contexts->slots.insert(contexts->slots.end(), batch.kv_slots().begin(), batch.kv_slots().end());
  }

  // One sequence per length, its context prefilled and appended to both drafters; room is
  // reserved for kCommitRows more rows and a block past them.
  Contexts MakeContexts(TwinDrafters& d, const std::vector<int32_t>& lengths, std::mt19937& rng) {
    Contexts c;
    std::vector<int32_t> seqs, zeros(lengths.size(), 0);
    for (const int32_t length : lengths) {
      const int32_t seq = d.cache().AddSequence();
      EXPECT_TRUE(d.cache().Reserve(seq, length + kCommitRows + d.config.block_size).ok());
      seqs.push_back(seq);
      c.tokens.push_back(RandomTokens(rng, static_cast<size_t>(length), d.vocab()));
    }
    AppendBoth(d, seqs, zeros, c.tokens, &c);
    std::uniform_int_distribution<int32_t> anchor(0, static_cast<int32_t>(d.vocab() - 1));
    for (size_t i = 0; i < seqs.size(); ++i) {
      c.requests.push_back(
          {.seq = seqs[i], .ctx_len = lengths[i], .anchor = anchor(rng), .committed = {}});
    }
    RefreshCommitted(&c);
    return c;
  }

  // Commits kCommitRows more tokens to every request (the last becomes the next anchor).
  void Commit(TwinDrafters& d, std::mt19937& rng, Contexts* c) {
    std::vector<int32_t> seqs, from;
    std::vector<std::vector<int32_t>> added;
    for (size_t i = 0; i < c->requests.size(); ++i) {
      const DraftRequest& r = c->requests[i];
      seqs.push_back(r.seq);
      from.push_back(r.ctx_len);
      std::vector<int32_t> rows = RandomTokens(rng, kCommitRows, d.vocab());
      rows[0] = r.anchor;
      added.push_back(rows);
    }
    AppendBoth(d, seqs, from, added, c);
    for (size_t i = 0; i < c->requests.size(); ++i) {
      DraftRequest& r = c->requests[i];
      c->tokens[i].insert(c->tokens[i].end(), added[i].begin(), added[i].end());
      r.ctx_len += kCommitRows;
      r.anchor = RandomTokens(rng, 1, d.vocab())[0];
    }
    RefreshCommitted(c);
  }

  static void RefreshCommitted(Contexts* c) {
    for (size_t i = 0; i < c->requests.size(); ++i) c->requests[i].committed = c->tokens[i];
  }

  // Every draft layer's K and V rows at `slots` in both drafters' stores.
  void ExpectSameDraftKv(TwinDrafters& d, const std::vector<int32_t>& slots) {
    const KvStore* store = d.cpu.context_store();
    ASSERT_NE(store, nullptr);
    cuda::DeviceKvCache& kv = d.device.kv();
    const int64_t row = kv.row_floats();
    const auto floats = static_cast<size_t>(kv.num_slots() * row);
    for (int32_t layer = 0; layer < store->num_layers(); ++layer) {
      SCOPED_TRACE(::testing::Message() << "draft layer " << layer);
      const std::vector<float> device_k = CopyFloats(kv.k(layer), floats, stream_);
      const std::vector<float> device_v = CopyFloats(kv.v(layer), floats, stream_);
      const cpu::PagedKvLayer cpu_layer = store->Layer(layer);
      std::vector<float> got_k, got_v, want_k, want_v;
      for (const int64_t slot : slots) {
        for (int64_t e = slot * row; e < (slot + 1) * row; ++e) {
          got_k.push_back(device_k[static_cast<size_t>(e)]);
          got_v.push_back(device_v[static_cast<size_t>(e)]);
          want_k.push_back(cpu_layer.k[e]);
          want_v.push_back(cpu_layer.v[e]);
        }
      }
      ExpectWithinBf16Tolerance(got_k, want_k, "draft K rows");
      ExpectWithinBf16Tolerance(got_v, want_v, "draft V rows");
    }
  }

  // Candidates are the greedy argmax of each backend's own draft logits, and the device's
  // equal the CPU's — except in rows whose CPU top-two margin is at most twice the row's
  // largest logit difference: only there can that difference swap the two, so those near-ties
  // are printed (both tokens, margin, error) and not held to equality. With errors of ~1% of
  // the logits' RMS (≈ 2) the excusing margin is ≈ 0.04, while the top-two gap of these rows
  // averages ≈ 0.6: about one row in fifteen is a near-tie. More than a quarter would mean the
  // logits are too noisy for the check to hold anything (for the rows compared here, a binomial
  // count at that rate passes a quarter with probability far below 1e-6).
  void ExpectSameCandidates(const DraftOutput& device, const DraftOutput& cpu, int64_t vocab) {
    ASSERT_EQ(device.tokens.size(), cpu.tokens.size());
    const auto rows = static_cast<int64_t>(cpu.tokens.size());
    int64_t near_ties = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const auto i = static_cast<size_t>(r);
      const testing::TopTwo want = TopOf(cpu.logits.data() + r * vocab, vocab);
      EXPECT_EQ(cpu.tokens[i], want.index) << "CPU candidate " << r;
      EXPECT_EQ(device.tokens[i], TopOf(device.logits.data() + r * vocab, vocab).index)
          << "device candidate " << r << " is not the argmax of its own logits";
      const double error = RowError(device.logits, cpu.logits, r, vocab);
      if (want.margin <= 2.0 * error) {
        ++near_ties;
        std::printf("near-tie in candidate row %lld: CPU %d, device %d, margin %.3g, error %.3g\n",
                    static_cast<long long>(r), cpu.tokens[i], device.tokens[i], want.margin, error);
        continue;
      }
      EXPECT_EQ(device.tokens[i], cpu.tokens[i])
          << "candidate row " << r << ": margin " << want.margin << ", logit error " << error;
    }
    RecordProperty("near_ties", static_cast<int>(near_ties));
    EXPECT_LE(near_ties * 4, rows) << near_ties << " near-ties among " << rows << " rows";
  }

  // Drafts `requests` on both drafters and compares the outputs and the K/V they wrote.
  void CompareDraft(TwinDrafters& d, const Contexts& c, int tile_rows) {
    SCOPED_TRACE(::testing::Message() << "tile " << tile_rows);
    DraftOutput cpu_out, device_out;
    ASSERT_TRUE(d.cpu.Draft(c.requests, d.cache(), tile_rows, &cpu_out).ok());
    ASSERT_TRUE(d.host.Draft(c.requests, d.cache(), tile_rows, &device_out).ok());
    const int32_t candidates = d.config.block_size - 1;
    ASSERT_EQ(device_out.candidates, candidates);
    ASSERT_EQ(device_out.tokens.size(), c.requests.size() * static_cast<size_t>(candidates));
    ExpectWithinBf16Tolerance(device_out.hidden, cpu_out.hidden, "draft hidden");
    ExpectWithinBf16Tolerance(device_out.logits, cpu_out.logits, "draft logits");
    ExpectSameCandidates(device_out, cpu_out, d.vocab());
    std::vector<int32_t> slots = c.slots;
    for (const DraftRequest& r : c.requests) {
      for (int32_t j = 0; j < d.config.block_size; ++j) {
        slots.push_back(d.cache().Slot(r.seq, r.ctx_len + j));
      }
    }
    ExpectSameDraftKv(d, slots);
  }

  // The context, drafts at both tile heights, a commit over the drafted block, drafts again.
  void RunScenario(const std::vector<int32_t>& lengths, int32_t max_requests,
                   int32_t max_context_rows, uint64_t seed) {
    TwinDrafters d(seed, max_requests, max_context_rows, stream_);
    std::mt19937 rng(static_cast<uint32_t>(seed));
    Contexts c = MakeContexts(d, lengths, rng);
    {
      SCOPED_TRACE("context as prefilled");
      ExpectSameDraftKv(d, c.slots);
      CompareDraft(d, c, 16);
      CompareDraft(d, c, 128);
    }
    Commit(d, rng, &c);
    SCOPED_TRACE("after a commit over the drafted block");
    CompareDraft(d, c, 16);
  }
};

TEST_F(CudaDFlashDrafterTest, OneRequestMatchesCpu) { RunScenario({37}, 8, 256, 61); }

TEST_F(CudaDFlashDrafterTest, ThreeRequestsMatchCpu) { RunScenario({5, 20, 33}, 8, 256, 62); }

// Drafts two requests and appends 32 context rows at a time: the adapter splits both.
TEST_F(CudaDFlashDrafterTest, FiveRequestsMatchCpuInChunks) {
  RunScenario({1, 17, 9, 40, 26}, 2, 32, 63);
}

// Anchors are validated where requests enter; a draft given one outside the vocabulary stops
// with the reason, as on the CPU.
TEST_F(CudaDFlashDrafterTest, AnchorsOutsideTheVocabularyAreACheckFailure) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TwinDrafters d(64, 4, 64, stream_);
  std::mt19937 rng(64);
  Contexts c = MakeContexts(d, {11, 3}, rng);
  for (const int32_t bad : {-1, static_cast<int32_t>(d.vocab())}) {
    c.requests[1].anchor = bad;
    DraftOutput out;
    EXPECT_DEATH(static_cast<void>(d.host.Draft(c.requests, d.cache(), 16, &out)),
                 "draft anchor outside the vocabulary")
        << bad;
  }
}

// Draft blocks in fixed device buffers, restaged before every step: what a captured draft step
// reads.
class FixedBlocks {
 public:
  FixedBlocks(int32_t requests, int32_t block, int32_t pages_per_request)
      : requests_(requests),
        block_(block),
        pages_per_request_(pages_per_request),
        tokens_(Rows()),
        positions_(Rows()),
        slots_(Rows()),
        page_tables_(static_cast<size_t>(requests * pages_per_request)),
        spans_(static_cast<size_t>(requests)) {}

  // Copies the blocks [anchor, MASK × (W−1)] of `requests` (synchronously).
  void Stage(const std::vector<DraftRequest>& requests, int32_t mask, const PagedKvCache& cache) {
    ASSERT_EQ(requests.size(), static_cast<size_t>(requests_));
    std::vector<int32_t> tokens, positions, slots;
    std::vector<int32_t> tables(page_tables_.size(), 0);
    std::vector<StepSpan> spans;
    for (int32_t i = 0; i < requests_; ++i) {
      const DraftRequest& r = requests[static_cast<size_t>(i)];
      for (int32_t j = 0; j < block_; ++j) {
        tokens.push_back(j == 0 ? r.anchor : mask);
        positions.push_back(r.ctx_len + j);
        slots.push_back(cache.Slot(r.seq, r.ctx_len + j));
      }
      const std::vector<int32_t>& pages = cache.PageTable(r.seq);
      ASSERT_LE(pages.size(), static_cast<size_t>(pages_per_request_));
      std::copy(pages.begin(), pages.end(), tables.begin() + i * pages_per_request_);
      spans.push_back({.q_start = i * block_,
                       .q_len = block_,
                       .ctx_len = r.ctx_len,
                       .page_table = page_tables_.data() + i * pages_per_request_});
    }
    tokens_.CopyFromHost(tokens.data());
    positions_.CopyFromHost(positions.data());
    slots_.CopyFromHost(slots.data());
    page_tables_.CopyFromHost(tables.data());
    spans_.CopyFromHost(spans.data());
  }

  cuda::DeviceBatchView view(int tile_rows) const {
    return {.rows = requests_ * block_,
            .tokens = tokens_.data(),
            .positions = positions_.data(),
            .kv_slots = slots_.data(),
            .live_rows = nullptr,
            .spans = spans_.data(),
            .num_spans = requests_,
            .max_q_len = block_,
            .tile_rows = tile_rows,
            .causal = false};
  }

 private:
  size_t Rows() const { return static_cast<size_t>(requests_ * block_); }

  int32_t requests_, block_, pages_per_request_;
  cuda::DeviceBuffer<int32_t> tokens_, positions_, slots_, page_tables_;
  cuda::DeviceBuffer<StepSpan> spans_;
};

TEST_F(CudaDFlashDrafterTest, GraphReplayEqualsEagerBitwise) {
  constexpr int32_t kRequests = 3;
  TwinDrafters d(65, kRequests, 64, stream_);
  std::mt19937 rng(65);
  const Contexts c = MakeContexts(d, {29, 6, 45}, rng);
  const int32_t block = d.config.block_size;
  const int32_t width = block - 1;
  const auto candidates = static_cast<size_t>(kRequests * width);
  FixedBlocks blocks(kRequests, block, kNumPages);
  cuda::DeviceDraftScratch scratch(d.device, kRequests, 64);
  cuda::DeviceBuffer<int32_t> tokens(candidates);
  cuda::DeviceBuffer<float> logits(candidates * static_cast<size_t>(d.vocab()));
  cuda::DeviceBuffer<float> hidden(candidates * static_cast<size_t>(d.device.dims().hidden));
  const auto enqueue = [&](cudaStream_t s) {
    d.device.EnqueueDraft(
        blocks.view(16), scratch,
        {.tokens = tokens.data(), .logits = logits.data(), .hidden = hidden.data()}, s);
  };

  // Two steps: fresh anchors at the committed lengths, then other anchors two positions back.
  std::vector<std::vector<DraftRequest>> steps = {c.requests, c.requests};
  for (DraftRequest& r : steps[1]) {
    r.ctx_len -= 2;
    r.anchor = RandomTokens(rng, 1, d.vocab())[0];
  }
  struct Outputs {
    std::vector<int32_t> tokens;
    std::vector<float> logits, hidden, k_first, v_last;
  };
  cuda::DeviceKvCache& kv = d.device.kv();
  const auto kv_floats = static_cast<size_t>(kv.num_slots() * kv.row_floats());
  const int32_t last_layer = kv.shape().num_layers - 1;
  const auto run = [&](const std::vector<DraftRequest>& step, const cuda::CapturedGraph* graph) {
    DSCALE_CUDA_CHECK(cudaMemsetAsync(tokens.data(), 0xff, tokens.bytes(), stream_));
    DSCALE_CUDA_CHECK(cudaMemsetAsync(logits.data(), 0xff, logits.bytes(), stream_));
    DSCALE_CUDA_CHECK(cudaMemsetAsync(hidden.data(), 0xff, hidden.bytes(), stream_));
    DSCALE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    blocks.Stage(step, static_cast<int32_t>(d.config.mask_token_id), d.cache());
    if (graph != nullptr) {
      graph->Replay(stream_);
    } else {
      enqueue(stream_);
    }
    Outputs out;
    out.tokens = ToHost(tokens);
    out.logits = CopyFloats(logits.data(), logits.size(), stream_);
    out.hidden = CopyFloats(hidden.data(), hidden.size(), stream_);
    out.k_first = CopyFloats(kv.k(0), kv_floats, stream_);
    out.v_last = CopyFloats(kv.v(last_layer), kv_floats, stream_);
    return out;
  };

  // One eager run first: it loads every kernel's module before the capture.
  run(steps[0], nullptr);
  const cuda::CapturedGraph graph = cuda::CapturedGraph::Capture(stream_, enqueue);
  EXPECT_GT(graph.kernel_nodes(), 0);
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "step " << i);
    const Outputs eager = run(steps[i], nullptr);
    const Outputs replayed = run(steps[i], &graph);
    for (const int32_t token : eager.tokens) {
      ASSERT_TRUE(token >= 0 && token < d.vocab()) << "eager candidates were written";
    }
    EXPECT_EQ(replayed.tokens, eager.tokens);
    EXPECT_TRUE(testing::SameBits(replayed.logits, eager.logits)) << "logits";
    EXPECT_TRUE(testing::SameBits(replayed.hidden, eager.hidden)) << "hidden";
    EXPECT_TRUE(testing::SameBits(replayed.k_first, eager.k_first)) << "layer 0 K";
    EXPECT_TRUE(testing::SameBits(replayed.v_last, eager.v_last)) << "last layer V";
  }
}

}  // namespace
}  // namespace dscale
