// The target and the drafter on a BF16 KV cache: logits within the rounding bound of an f32
// cache, a committed position's K/V the same bits whether a decode step or a verify step wrote
// them, and the drafter's context cache in the target cache's dtype.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "kernels/cpu/gemm_bf16.h"
#include "logit_bounds.h"
#include "model/decoder_model.h"
#include "model/random_checkpoint.h"
#include "support/tiny_models.h"

namespace dscale {
namespace {

using testing::OddTinyConfig;
using testing::RandomTokens;

// Logits of every position of `tokens` through a `dtype` cache: a prefill of the first
// `prompt` tokens, then one decode step per remaining token (which attend over stored rows).
std::vector<float> PrefillThenDecode(DecoderModel& model, const std::vector<int32_t>& tokens,
                                     int32_t prompt, KvDtype dtype) {
  const auto n = static_cast<int32_t>(tokens.size());
  PagedKvCache cache(model.KvShape(16, (n + 15) / 16).WithDtype(dtype));
  const int32_t seq = cache.AddSequence();
  EXPECT_TRUE(cache.Reserve(seq, n).ok());
  std::vector<float> logits;
  ForwardOutput out;
  for (int32_t pos = 0; pos < n;) {
    const int32_t rows = pos == 0 ? prompt : 1;
    StepBatch batch;
    AddRequestRows(batch, seq, pos, std::span(tokens).subspan(pos, rows), cache,
                   /*all_logits=*/true);
    batch.tile_rows = rows > 16 ? 128 : 16;
    EXPECT_TRUE(model.Forward(batch, cache, &out).ok());
    logits.insert(logits.end(), out.logits.begin(), out.logits.end());
    pos += rows;
  }
  return logits;
}

// Each cache's logits are within its bound of the exact model (logit_bounds.h: the BF16 one adds
// the rounding of every K and V), so the two agree to B_f32 + B_bf16 for every vocabulary row.
TEST(KvDtypeTest, Bf16CacheLogitsStayWithinTheRoundingBoundOfF32Cache) {
  const DecoderConfig config = OddTinyConfig();
  for (const DType weights : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(weights));
    DecoderModel model(config, RandomDecoderWeights(config, 17, weights));
    const std::vector<int32_t> tokens = RandomTokens(45, config.vocab_size, 4);
    const std::vector<float> f32 = PrefillThenDecode(model, tokens, 37, KvDtype::kF32);
    const std::vector<float> bf16 = PrefillThenDecode(model, tokens, 37, KvDtype::kBf16);
    const std::vector<double> f32_bounds = testing::TargetLogitBounds(model, 45, KvDtype::kF32);
    const std::vector<double> bf16_bounds = testing::TargetLogitBounds(model, 45, KvDtype::kBf16);
    ASSERT_EQ(f32.size(), bf16.size());
    const size_t vocab = f32_bounds.size();
    double worst = 0, largest = 0;
    for (size_t i = 0; i < f32.size(); ++i) {
      const double diff = std::abs(double{f32[i]} - bf16[i]);
      worst = std::max(worst, diff / (f32_bounds[i % vocab] + bf16_bounds[i % vocab]));
      largest = std::max(largest, diff);
    }
    EXPECT_LE(worst, 1.0);
    EXPECT_GT(largest, 0.0) << "the BF16 cache must round what it stores";
  }
}

// Speculation is lossless only if a committed position's K/V do not depend on the step that
// wrote them. Both steps compute the position's f32 K/V row by row in the same order — every
// GEMM runs tiles whose per-row arithmetic does not depend on the row count
// (tests/kernels/row_invariance_test.cc), and the other kernels work per row — and the store
// rounds equal f32 values to equal BF16 bits.
TEST(KvDtypeTest, CommittedKvIsTheSameFromADecodeStepOrAVerifyStep) {
  constexpr int32_t kVerifyRows = 16;
  const DecoderConfig config = OddTinyConfig();
  DecoderModel model(config, RandomDecoderWeights(config, 23, DType::kBF16));
  const std::vector<int32_t> tokens = RandomTokens(20 + kVerifyRows, config.vocab_size, 6);
  const int32_t prompt = 20;
  // Cache a: prompt, then a one-row decode step at position `prompt`. Cache b: prompt, then a
  // verify step of kVerifyRows rows starting there.
  std::vector<PagedKvCache> caches;
  for (int i = 0; i < 2; ++i) caches.emplace_back(model.KvShape(16, 4));
  ForwardOutput out;
  for (int i = 0; i < 2; ++i) {
    PagedKvCache& cache = caches[i];
    const int32_t seq = cache.AddSequence();
    ASSERT_TRUE(cache.Reserve(seq, prompt + kVerifyRows).ok());
    StepBatch batch;
    AddRequestRows(batch, seq, 0, std::span(tokens).first(prompt), cache, false);
    ASSERT_TRUE(model.Forward(batch, cache, &out).ok());
    batch.Clear();
    const int32_t rows = i == 0 ? 1 : kVerifyRows;
    AddRequestRows(batch, seq, prompt, std::span(tokens).subspan(prompt, rows), cache, true);
    batch.tile_rows = 16;
    ASSERT_TRUE(model.Forward(batch, cache, &out).ok());
  }
  const int64_t row = config.num_key_value_heads * config.head_dim;
  std::vector<float> k[2], v[2];
  for (int32_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    for (int i = 0; i < 2; ++i) {
      k[i].resize(row);
      v[i].resize(row);
      caches[i].store().Read(layer, caches[i].Slot(0, prompt), k[i].data(), v[i].data());
    }
    EXPECT_EQ(k[0], k[1]) << "layer " << layer;
    EXPECT_EQ(v[0], v[1]) << "layer " << layer;
  }
}

TEST(KvDtypeTest, DrafterContextCacheFollowsTheTargetCache) {
  const DecoderConfig config = OddTinyConfig();
  const DecoderModel target(config, RandomDecoderWeights(config, 3, DType::kF32));
  const std::unique_ptr<DFlashDrafter> drafter = testing::RandomDrafter(target, 4);
  for (const KvDtype dtype : {KvDtype::kBf16, KvDtype::kF32}) {
    const PagedKvCache cache(target.KvShape(16, 4).WithDtype(dtype));
    drafter->Bind(cache);
    ASSERT_NE(drafter->context_store(), nullptr);
    EXPECT_EQ(drafter->context_store()->dtype(), dtype);
    EXPECT_EQ(drafter->context_store()->Layer(0).bf16(), dtype == KvDtype::kBf16);
  }
}

}  // namespace
}  // namespace dscale
