#include "model/qwen3_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <span>

#include <unistd.h>

#include "model/greedy_decode.h"
#include "model/random_checkpoint.h"
#include "model_test_util.h"
#include "reference_forward.h"

namespace dscale {
namespace {

using testing::OddTinyConfig;
using testing::RandomTokens;

// Float32 kernels against a double-accumulating reference, and chunked vs one-shot prefill,
// agree to this bound on logits of magnitude ~10.
constexpr float kLogitTolerance = 1e-4f;
// The same request alone and in a batch of 32: float rounding from GEMM blocking only.
constexpr float kBatchNoise = 2e-5f;

float MaxAbsDiff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  float worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  return worst;
}

Qwen3Model MakeModel(const Qwen3Config& config, uint64_t seed) {
  return Qwen3Model(config, RandomQwen3Weights(config, seed, DType::kF32));
}

// Logits for every position of `tokens` from one prefill of the sequence alone.
std::vector<float> OnePrefillLogits(Qwen3Model& model, const std::vector<int32_t>& tokens) {
  const auto n = static_cast<int32_t>(tokens.size());
  PagedKvCache cache(model.KvShape(16, (n + 15) / 16));
  const int32_t seq = cache.AddSequence();
  EXPECT_TRUE(cache.Reserve(seq, n).ok());
  PackedBatch batch;
  batch.AddRequest(seq, 0, tokens, cache, /*all_logits=*/true);
  ForwardOutput out;
  EXPECT_TRUE(model.Forward(batch, {}, cache, &out).ok());
  return out.logits;
}

TEST(Qwen3ModelTest, ForwardMatchesReferenceForwardAndCapturesFeatures) {
  const Qwen3Config config = OddTinyConfig();
  Qwen3Model model = MakeModel(config, 7);
  const std::vector<int32_t> tokens = RandomTokens(37, config.vocab_size, 1);
  const testing::ReferenceOutput expected =
      testing::ReferenceForward(config, model.weights(), tokens);

  PagedKvCache cache(model.KvShape(5, 8));
  const int32_t seq = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(seq, 37).ok());
  PackedBatch batch;
  batch.AddRequest(seq, 0, tokens, cache, /*all_logits=*/true);
  ForwardOutput out;
  const std::vector<int32_t> capture = {2, 0};  // list order, not layer order
  ASSERT_TRUE(model.Forward(batch, {.tile_rows = 16, .capture_layers = capture}, cache, &out).ok());

  EXPECT_LE(MaxAbsDiff(out.logits, expected.logits), kLogitTolerance);
  const int64_t h = config.hidden_size;
  ASSERT_EQ(out.features.size(), 37u * 2 * h);
  for (int32_t r = 0; r < 37; ++r) {
    for (size_t slot = 0; slot < capture.size(); ++slot) {
      std::span<const float> got(out.features.data() + (r * 2 + slot) * h, h);
      std::span<const float> want(expected.residuals[capture[slot]].data() + r * h, h);
      EXPECT_LE(MaxAbsDiff(got, want), 1e-4f) << "row " << r << " layer " << capture[slot];
    }
  }
}

// One request of the interleaved schedule below.
struct ScheduledRequest {
  std::vector<int32_t> tokens;  // the whole sequence: prompt, then teacher-forced decode tokens
  int32_t prompt_len;
  int32_t chunk;  // prefill chunk size
  int32_t seq = -1;
  int32_t done = 0;
  std::vector<float> logits;  // [tokens, vocab], filled by the schedule
};

// Runs all requests together, one packed batch per step: each request contributes its next
// prefill chunk, or one token once its prompt is in. Pages are reserved step by step, so the
// requests' pages interleave and cross page boundaries.
void RunInterleaved(Qwen3Model& model, std::vector<ScheduledRequest>& requests, int tile_rows) {
  const int64_t vocab = model.config().vocab_size;
  PagedKvCache cache(model.KvShape(/*page_size=*/5, /*num_pages=*/256));
  for (ScheduledRequest& r : requests) {
    r.seq = cache.AddSequence();
    r.logits.assign(r.tokens.size() * vocab, 0.0f);
  }
  PackedBatch batch;
  ForwardOutput out;
  for (bool pending = true; pending;) {
    batch.Clear();
    std::vector<std::pair<ScheduledRequest*, int32_t>> rows;  // (request, first position)
    for (ScheduledRequest& r : requests) {
      const auto total = static_cast<int32_t>(r.tokens.size());
      if (r.done == total) continue;
      const int32_t n = r.done < r.prompt_len ? std::min(r.chunk, r.prompt_len - r.done) : 1;
      ASSERT_TRUE(cache.Reserve(r.seq, r.done + n).ok());
      batch.AddRequest(r.seq, r.done, std::span(r.tokens).subspan(r.done, n), cache, true);
      rows.emplace_back(&r, r.done);
      r.done += n;
    }
    pending = !rows.empty();
    if (!pending) break;
    const int tile = tile_rows > 0 ? tile_rows : (batch.MaxQueryLen() <= 16 ? 16 : 128);
    ASSERT_TRUE(model.Forward(batch, {.tile_rows = tile}, cache, &out).ok());
    int64_t row = 0;
    for (auto [r, first] : rows) {
      for (int32_t pos = first; pos < r->done; ++pos, ++row) {
        std::copy_n(out.logits.begin() + row * vocab, vocab, r->logits.begin() + pos * vocab);
      }
    }
  }
}

std::vector<ScheduledRequest> MixedRequests(int64_t vocab) {
  // (prompt, decode steps, chunk): lengths 1..133, chunks smaller and larger than pages.
  const int32_t shapes[][3] = {{1, 6, 1}, {7, 3, 3}, {19, 9, 8}, {40, 2, 16}, {133, 4, 33}};
  std::vector<ScheduledRequest> requests;
  uint32_t seed = 100;
  for (const auto& s : shapes) {
    requests.push_back({.tokens = RandomTokens(s[0] + s[1], vocab, seed++),
                        .prompt_len = s[0],
                        .chunk = s[2]});
  }
  return requests;
}

class ChunkedPrefillTest : public ::testing::TestWithParam<int> {};

TEST_P(ChunkedPrefillTest, InterleavedChunksAndDecodeStepsMatchOnePrefill) {
  const Qwen3Config config = OddTinyConfig();
  Qwen3Model model = MakeModel(config, 11);
  std::vector<ScheduledRequest> requests = MixedRequests(config.vocab_size);
  RunInterleaved(model, requests, GetParam());
  for (const ScheduledRequest& r : requests) {
    const std::vector<float> expected = OnePrefillLogits(model, r.tokens);
    EXPECT_LE(MaxAbsDiff(r.logits, expected), kLogitTolerance)
        << "request of length " << r.tokens.size();
  }
}

// 0 routes by path (16 for short rows, 128 for long prefill chunks).
INSTANTIATE_TEST_SUITE_P(TileHeights, ChunkedPrefillTest, ::testing::Values(0, 16, 64, 128));

TEST(Qwen3ModelTest, RequestLogitsDoNotDependOnTheRestOfTheBatch) {
  const Qwen3Config config = OddTinyConfig();
  Qwen3Model model = MakeModel(config, 13);
  ScheduledRequest probe{.tokens = RandomTokens(28, config.vocab_size, 5), .prompt_len = 23,
                         .chunk = 23};
  std::vector<ScheduledRequest> alone = {probe};
  RunInterleaved(model, alone, 0);

  std::vector<ScheduledRequest> crowd = {probe};
  for (uint32_t i = 0; i < 31; ++i) {
    const int32_t prompt = 1 + static_cast<int32_t>((i * 37) % 50);
    crowd.push_back({.tokens = RandomTokens(prompt + 5, config.vocab_size, 1000 + i),
                     .prompt_len = prompt,
                     .chunk = 1 + static_cast<int32_t>(i % 17)});
  }
  std::rotate(crowd.begin(), crowd.begin() + 1, crowd.begin() + 17);  // probe in the middle
  RunInterleaved(model, crowd, 0);
  const auto it = std::find_if(crowd.begin(), crowd.end(),
                               [&](const ScheduledRequest& r) { return r.tokens == probe.tokens; });
  ASSERT_NE(it, crowd.end());
  // Attention and every elementwise kernel compute a row the same way whatever else is batched;
  // only OpenBLAS may pick a different micro-kernel path for a different row count, which moves
  // logits by float rounding (measured ~5e-6 on logits of magnitude ~10). The bound says so.
  EXPECT_LE(MaxAbsDiff(it->logits, alone[0].logits), kBatchNoise);
}

TEST(Qwen3ModelTest, LoadsTheCheckpointMakeTinyWrites) {
  Qwen3Config config = OddTinyConfig();
  config.tie_word_embeddings = true;
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("dscale_model_test_" + std::to_string(::getpid())))
                              .string();
  ASSERT_TRUE(WriteRandomQwen3Checkpoint(dir, config, 3, DType::kBF16).ok());
  Result<Qwen3Model> loaded = Qwen3Model::Load(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  Qwen3Model in_memory(config, RandomQwen3Weights(config, 3, DType::kBF16));
  const std::vector<int32_t> tokens = RandomTokens(9, config.vocab_size, 2);
  EXPECT_EQ(MaxAbsDiff(OnePrefillLogits(*loaded, tokens), OnePrefillLogits(in_memory, tokens)),
            0.0f);
  std::filesystem::remove_all(dir);
}

TEST(Qwen3ModelTest, BadInputIsAClearError) {
  const Qwen3Config config = OddTinyConfig();
  Qwen3Model model = MakeModel(config, 1);
  PagedKvCache cache(model.KvShape(16, 4));
  const int32_t seq = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(seq, 3).ok());
  PackedBatch batch;
  batch.AddRequest(seq, 0, std::vector<int32_t>{1, 131, 2}, cache, false);
  ForwardOutput out;
  Status s = model.Forward(batch, {}, cache, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("token id 131 at row 1"), std::string::npos) << s.message();

  batch.tokens[1] = 5;
  s = model.Forward(batch, {.capture_layers = {3}}, cache, &out);
  EXPECT_NE(s.message().find("capture layer 3"), std::string::npos) << s.message();

  const Result<Qwen3Model> missing = Qwen3Model::Load("/nonexistent/dscale-model");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/dscale-model"), std::string::npos)
      << missing.status().message();
}

TEST(GreedyDecodeTest, ChunkedPrefillGivesTheSameTokensAndFollowsTheArgmax) {
  const Qwen3Config config = OddTinyConfig();
  Qwen3Model model = MakeModel(config, 21);
  const std::vector<int32_t> prompt = RandomTokens(29, config.vocab_size, 8);
  const Result<std::vector<int32_t>> whole = GreedyDecode(model, prompt, {.max_new_tokens = 12});
  const Result<std::vector<int32_t>> chunked =
      GreedyDecode(model, prompt, {.max_new_tokens = 12, .prefill_chunk = 6, .page_size = 5});
  ASSERT_TRUE(whole.ok() && chunked.ok());
  EXPECT_EQ(*whole, *chunked);
  ASSERT_EQ(whole->size(), 12u);

  // Every generated token is the argmax of the one-prefill logits at the previous position.
  std::vector<int32_t> sequence = prompt;
  sequence.insert(sequence.end(), whole->begin(), whole->end() - 1);
  const std::vector<float> logits = OnePrefillLogits(model, sequence);
  const int64_t vocab = config.vocab_size;
  for (size_t i = 0; i < whole->size(); ++i) {
    const size_t row = prompt.size() - 1 + i;
    const auto first = logits.begin() + row * vocab;
    EXPECT_EQ(std::max_element(first, first + vocab) - first, (*whole)[i]) << "token " << i;
  }
}

TEST(GreedyDecodeTest, StopsOnEosAndRejectsOverlongRequests) {
  Qwen3Config config = OddTinyConfig();
  Qwen3Model model = MakeModel(config, 21);
  const std::vector<int32_t> prompt = RandomTokens(5, config.vocab_size, 8);
  const std::vector<int32_t> free_run = GreedyDecode(model, prompt, {.max_new_tokens = 6}).value();
  const std::vector<int32_t> stopped =
      GreedyDecode(model, prompt, {.max_new_tokens = 6, .stop_ids = {free_run[2]}}).value();
  const auto first_stop = std::find(free_run.begin(), free_run.end(), free_run[2]);
  EXPECT_EQ(stopped, std::vector<int32_t>(free_run.begin(), first_stop + 1));

  const Result<std::vector<int32_t>> too_long =
      GreedyDecode(model, prompt, {.max_new_tokens = 1020});
  EXPECT_NE(too_long.status().message().find("max_position_embeddings"), std::string::npos);
}

}  // namespace
}  // namespace dscale
