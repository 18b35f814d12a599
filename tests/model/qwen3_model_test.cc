#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <span>

#include "logit_bounds.h"
#include "model/decoder_model.h"
#include "model/greedy_decode.h"
#include "model/random_checkpoint.h"
#include "prefill_logits.h"
#include "reference_forward.h"
#include "support/tiny_models.h"

namespace dscale {
namespace {

using testing::OddTinyConfig;
using testing::RandomTokens;

float MaxAbsDiff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  float worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  return worst;
}

// Logits [rows, vocab] from two computation orders (kernels vs the double-accumulating
// reference, chunked vs one prefill, batched vs alone): each is within B_v of exact
// (logit_bounds.h), so they agree to 2·B_v. Returns the largest |a − b| / (2·B_v): at most 1.
double WorstLogitDiffOverBound(std::span<const float> a, std::span<const float> b,
                               const std::vector<double>& bounds) {
  EXPECT_EQ(a.size(), b.size());
  const size_t vocab = bounds.size();
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::abs(double{a[i]} - b[i]) / (2.0 * bounds[i % vocab]));
  }
  return worst;
}

DecoderModel MakeModel(const DecoderConfig& config, uint64_t seed) {
  return DecoderModel(config, RandomDecoderWeights(config, seed, DType::kF32));
}

TEST(Qwen3ModelTest, ForwardMatchesReferenceForwardAndCapturesFeatures) {
  const DecoderConfig config = OddTinyConfig();
  DecoderModel model = MakeModel(config, 7);
  const std::vector<int32_t> tokens = RandomTokens(37, config.vocab_size, 1);
  const testing::ReferenceOutput expected =
      testing::ReferenceForward(config, model.weights(), tokens);

  PagedKvCache cache(model.KvShape(5, 8).WithDtype(KvDtype::kF32));
  const int32_t seq = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(seq, 37).ok());
  StepBatch batch;
  AddRequestRows(batch, seq, 0, tokens, cache, /*all_logits=*/true);
  ForwardOutput out;
  const std::vector<int32_t> capture = {2, 0};  // list order, not layer order
  batch.tile_rows = 16;
  batch.capture_layers = capture;
  ASSERT_TRUE(model.Forward(batch, cache, &out).ok());

  EXPECT_LE(WorstLogitDiffOverBound(out.logits, expected.logits,
                                    testing::TargetLogitBounds(model, 37, KvDtype::kF32)),
            1.0);
  // Captured residuals after layer l: the same first-order bound with 6·(l + 1) reductions.
  // A residual component sums random-signed terms, whose magnitudes we take as √H·‖row‖∞.
  const int64_t h = config.hidden_size;
  ASSERT_EQ(out.features.size(), 37u * 2 * h);
  for (int32_t r = 0; r < 37; ++r) {
    for (size_t slot = 0; slot < capture.size(); ++slot) {
      std::span<const float> got(out.features.data() + (r * 2 + slot) * h, h);
      std::span<const float> want(expected.residuals[capture[slot]].data() + r * h, h);
      float row_max = 0;
      for (const float x : want) row_max = std::max(row_max, std::abs(x));
      const int reductions = testing::kReductionsPerLayer * (capture[slot] + 1);
      const double bound = 2.0 * reductions *
                           testing::FloatGamma(testing::LongestReduction(config, 37)) *
                           std::sqrt(double(h)) * row_max;
      EXPECT_LE(MaxAbsDiff(got, want), bound) << "row " << r << " layer " << capture[slot];
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
void RunInterleaved(DecoderModel& model, std::vector<ScheduledRequest>& requests, int tile_rows) {
  const int64_t vocab = model.config().vocab_size;
  PagedKvCache cache(model.KvShape(/*page_size=*/5, /*num_pages=*/256).WithDtype(KvDtype::kF32));
  for (ScheduledRequest& r : requests) {
    r.seq = cache.AddSequence();
    r.logits.assign(r.tokens.size() * vocab, 0.0f);
  }
  StepBatch batch;
  ForwardOutput out;
  for (bool pending = true; pending;) {
    batch.Clear();
    std::vector<std::pair<ScheduledRequest*, int32_t>> rows;  // (request, first position)
    for (ScheduledRequest& r : requests) {
      const auto total = static_cast<int32_t>(r.tokens.size());
      if (r.done == total) continue;
      const int32_t n = r.done < r.prompt_len ? std::min(r.chunk, r.prompt_len - r.done) : 1;
      ASSERT_TRUE(cache.Reserve(r.seq, r.done + n).ok());
      AddRequestRows(batch, r.seq, r.done, std::span(r.tokens).subspan(r.done, n), cache, true);
      rows.emplace_back(&r, r.done);
      r.done += n;
    }
    pending = !rows.empty();
    if (!pending) break;
    const int tile = tile_rows > 0 ? tile_rows : (batch.MaxQueryLen() <= 16 ? 16 : 128);
    batch.tile_rows = tile;
    ASSERT_TRUE(model.Forward(batch, cache, &out).ok());
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
    requests.push_back(
        {.tokens = RandomTokens(s[0] + s[1], vocab, seed++), .prompt_len = s[0], .chunk = s[2]});
  }
  return requests;
}

class ChunkedPrefillTest : public ::testing::TestWithParam<int> {};

TEST_P(ChunkedPrefillTest, InterleavedChunksAndDecodeStepsMatchOnePrefill) {
  const DecoderConfig config = OddTinyConfig();
  DecoderModel model = MakeModel(config, 11);
  std::vector<ScheduledRequest> requests = MixedRequests(config.vocab_size);
  RunInterleaved(model, requests, GetParam());
  for (const ScheduledRequest& r : requests) {
    const std::vector<float> expected = testing::PrefillLogits(model, r.tokens);
    const auto context = static_cast<int64_t>(r.tokens.size());
    EXPECT_LE(WorstLogitDiffOverBound(r.logits, expected,
                                      testing::TargetLogitBounds(model, context, KvDtype::kF32)),
              1.0)
        << "request of length " << r.tokens.size();
  }
}

// 0 routes by path (16 for short rows, 128 for long prefill chunks).
INSTANTIATE_TEST_SUITE_P(TileHeights, ChunkedPrefillTest, ::testing::Values(0, 16, 64, 128));

TEST(Qwen3ModelTest, RequestLogitsDoNotDependOnTheRestOfTheBatch) {
  const DecoderConfig config = OddTinyConfig();
  DecoderModel model = MakeModel(config, 13);
  ScheduledRequest probe{
      .tokens = RandomTokens(28, config.vocab_size, 5), .prompt_len = 23, .chunk = 23};
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
  // only the GEMM may block a different row count differently (OpenBLAS picks its kernels by
  // shape and CPU), which moves logits by float rounding only: within the order bound.
  EXPECT_LE(WorstLogitDiffOverBound(it->logits, alone[0].logits,
                                    testing::TargetLogitBounds(model, 28, KvDtype::kF32)),
            1.0);
}

TEST(Qwen3ModelTest, LoadsTheCheckpointMakeTinyWrites) {
  DecoderConfig config = OddTinyConfig();
  config.tie_word_embeddings = true;
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("dscale_model_test_" + std::to_string(::getpid())))
          .string();
  ASSERT_TRUE(WriteRandomCheckpoint(dir, config, 3, DType::kBF16).ok());
  Result<DecoderModel> loaded = DecoderModel::Load(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  DecoderModel in_memory(config, RandomDecoderWeights(config, 3, DType::kBF16));
  const std::vector<int32_t> tokens = RandomTokens(9, config.vocab_size, 2);
  // The same weights through the same kernels in the same order: bit-identical by construction.
  EXPECT_EQ(MaxAbsDiff(testing::PrefillLogits(*loaded, tokens),
                       testing::PrefillLogits(in_memory, tokens)),
            0.0f);
  std::filesystem::remove_all(dir);
}

// Token ids and capture layers are a forward's preconditions (requests are validated where they
// enter, CheckTokenIds): a batch that breaks them stops the process naming the reason.
TEST(Qwen3ModelDeathTest, BadBatchIsACheckFailure) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const DecoderConfig config = OddTinyConfig();
  DecoderModel model = MakeModel(config, 1);
  PagedKvCache cache(model.KvShape(16, 4));
  const int32_t seq = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(seq, 3).ok());
  StepBatch batch;
  AddRequestRows(batch, seq, 0, std::vector<int32_t>{1, 131, 2}, cache, false);
  ForwardOutput out;
  EXPECT_DEATH(static_cast<void>(model.Forward(batch, cache, &out)),
               "token outside the vocabulary");
  batch.token_storage()[1] = 5;
  EXPECT_TRUE(model.Forward(batch, cache, &out).ok());
  batch.capture_layers = {3};
  EXPECT_DEATH(static_cast<void>(model.Forward(batch, cache, &out)), "capture layer outside");
}

TEST(Qwen3ModelTest, TokenIdsAreCheckedAtTheBoundary) {
  const std::vector<int32_t> ids = {1, 131, 2};
  const Status s = CheckTokenIds(ids, 131, "prompt");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(
      s.message().find("prompt: token id 131 at position 1 is outside the vocabulary [0, 131)"),
      std::string::npos)
      << s.message();
  EXPECT_TRUE(CheckTokenIds(std::vector<int32_t>{0, 130}, 131, "prompt").ok());
  EXPECT_FALSE(CheckTokenIds(std::vector<int32_t>{-1}, 131, "prompt").ok());
}

TEST(Qwen3ModelTest, MissingCheckpointIsAClearError) {
  const Result<DecoderModel> missing = DecoderModel::Load("/nonexistent/dscale-model");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/dscale-model"), std::string::npos)
      << missing.status().message();
}

TEST(GreedyDecodeTest, ChunkedPrefillGivesTheSameTokensAndFollowsTheArgmax) {
  const DecoderConfig config = OddTinyConfig();
  DecoderModel model = MakeModel(config, 21);
  const std::vector<int32_t> prompt = RandomTokens(29, config.vocab_size, 8);
  const Result<std::vector<int32_t>> whole =
      GreedyDecode(model, prompt, {.max_new_tokens = 12, .kv_dtype = KvDtype::kF32});
  const Result<std::vector<int32_t>> chunked = GreedyDecode(
      model, prompt,
      {.max_new_tokens = 12, .prefill_chunk = 6, .page_size = 5, .kv_dtype = KvDtype::kF32});
  ASSERT_TRUE(whole.ok() && chunked.ok());
  ASSERT_EQ(whole->size(), 12u);

  // Every generated token is the argmax of the one-prefill logits at the previous position, and
  // chunking changes no token: a row's logits have the same bits in a one-row decode step, a
  // chunk of 6 and the whole prefill, so not even a near-tie can part them.
  std::vector<int32_t> sequence = prompt;
  sequence.insert(sequence.end(), whole->begin(), whole->end() - 1);
  const std::vector<float> logits = testing::PrefillLogits(model, sequence);
  const int64_t vocab = config.vocab_size;
  for (size_t i = 0; i < whole->size(); ++i) {
    const size_t row = prompt.size() - 1 + i;
    const auto first = logits.begin() + static_cast<int64_t>(row) * vocab;
    const auto argmax = std::max_element(first, first + vocab) - first;
    EXPECT_EQ(argmax, (*whole)[i]) << "token " << i;
    EXPECT_EQ((*chunked)[i], (*whole)[i]) << "token " << i;
  }
}

TEST(GreedyDecodeTest, StopsOnEosAndRejectsOverlongRequests) {
  DecoderConfig config = OddTinyConfig();
  DecoderModel model = MakeModel(config, 21);
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
