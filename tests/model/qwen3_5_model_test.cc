// Qwen3.5 hybrid targets on the CPU backend: a request's linear-attention state carried across
// forwards (a prefill cut into chunks at odd places, then one row at a time, against the whole
// prefill), a request's bits independent of the requests beside it in a batch, rejected verify
// rows leaving nothing behind, and a span that does not start at its state's position refused.
// Logits against the float64 reference are tests/parity's (hybrid_reference.py).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "model/decoder_model.h"
#include "model/random_checkpoint.h"
#include "prefill_logits.h"
#include "support/tiny_models.h"

namespace dscale {
namespace {

// Odd sizes: 3 query heads over 1 KV head of 20 (8 dims rotated), 3 key heads over 6 value
// heads of 10 and 7, conv kernel 3; layers linear, full, linear, linear, full.
DecoderConfig OddHybridConfig() {
  DecoderConfig c = TinyQwen3_5Config();
  c.vocab_size = 301;
  c.hidden_size = 75;
  c.intermediate_size = 101;
  c.num_hidden_layers = 5;
  c.num_attention_heads = 3;
  c.num_key_value_heads = 1;
  c.head_dim = 20;
  c.hybrid.partial_rotary_factor = 0.4;
  c.hybrid.layer_types = {LayerKind::kLinearAttention, LayerKind::kFullAttention,
                          LayerKind::kLinearAttention, LayerKind::kLinearAttention,
                          LayerKind::kFullAttention};
  c.hybrid.linear = {
      .key_heads = 3, .value_heads = 6, .key_head_dim = 10, .value_head_dim = 7, .conv_kernel = 3};
  return c;
}

// Logits of `tokens` forwarded in chunks cut at `cuts` (each chunk one forward of its own, the
// state carried in the cache between them).
std::vector<float> ChunkedLogits(DecoderModel& model, const std::vector<int32_t>& tokens,
                                 const std::vector<int32_t>& cuts) {
  const auto n = static_cast<int32_t>(tokens.size());
  PagedKvCache cache(model.KvShape(16, (n + 15) / 16).WithDtype(KvDtype::kF32));
  const int32_t seq = cache.AddSequence();
  EXPECT_TRUE(cache.Reserve(seq, n).ok());
  std::vector<int32_t> bounds = {0};
  bounds.insert(bounds.end(), cuts.begin(), cuts.end());
  bounds.push_back(n);
  std::vector<float> logits;
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    StepBatch batch;
    const std::vector<int32_t> chunk(tokens.begin() + bounds[i], tokens.begin() + bounds[i + 1]);
    AddRequestRows(batch, seq, bounds[i], chunk, cache, /*all_logits=*/true);
    ForwardOutput out;
    EXPECT_TRUE(model.Forward(batch, cache, &out).ok());
    logits.insert(logits.end(), out.logits.begin(), out.logits.end());
  }
  return logits;
}

float MaxRelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float scale = 0, diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::fabs(b[i]));
    diff = std::max(diff, std::fabs(a[i] - b[i]));
  }
  return diff / scale;
}

// The state carries over forwards: chunks and single rows give the whole prefill's logits (to
// float rounding: a chunk's GEMMs and attention see other row counts), and a chunk forwarded
// from a fresh state instead would be far off.
TEST(Qwen3_5ModelTest, ChunkedPrefillCarriesTheRecurrentState) {
  const DecoderConfig config = OddHybridConfig();
  DecoderModel model(config, RandomDecoderWeights(config, 9, DType::kBF16));
  const std::vector<int32_t> tokens = testing::RandomTokens(23, config.vocab_size, 5);
  const std::vector<float> whole = testing::PrefillLogits(model, tokens);
  std::vector<int32_t> every_row;
  for (int32_t i = 1; i < 23; ++i) every_row.push_back(i);
  for (const std::vector<int32_t>& cuts : {std::vector<int32_t>{1, 6, 7, 17}, every_row}) {
    EXPECT_LT(MaxRelativeDifference(ChunkedLogits(model, tokens, cuts), whole), 1e-4f);
  }
  // The second half from a fresh sequence (no state, no K/V) is another computation.
  const std::vector<int32_t> tail(tokens.begin() + 12, tokens.end());
  const std::vector<float> fresh = testing::PrefillLogits(model, tail);
  const std::vector<float> carried(whole.end() - static_cast<ptrdiff_t>(fresh.size()), whole.end());
  EXPECT_GT(MaxRelativeDifference(fresh, carried), 1e-2f);
}

// Two requests in one batch give each the bits it gets alone.
TEST(Qwen3_5ModelTest, RequestBitsDoNotDependOnTheBatch) {
  const DecoderConfig config = OddHybridConfig();
  DecoderModel model(config, RandomDecoderWeights(config, 4, DType::kBF16));
  const std::vector<int32_t> a = testing::RandomTokens(13, config.vocab_size, 1);
  const std::vector<int32_t> b = testing::RandomTokens(6, config.vocab_size, 2);
  PagedKvCache cache(model.KvShape(16, 4).WithDtype(KvDtype::kF32));
  const int32_t sa = cache.AddSequence(), sb = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(sa, 13).ok());
  ASSERT_TRUE(cache.Reserve(sb, 6).ok());
  StepBatch batch;
  AddRequestRows(batch, sa, 0, a, cache, /*all_logits=*/true);
  AddRequestRows(batch, sb, 0, b, cache, /*all_logits=*/true);
  ForwardOutput out;
  ASSERT_TRUE(model.Forward(batch, cache, &out).ok());
  const std::vector<float> alone_a = testing::PrefillLogits(model, a);
  const std::vector<float> alone_b = testing::PrefillLogits(model, b);
  const auto split = static_cast<ptrdiff_t>(alone_a.size());
  EXPECT_EQ(std::vector<float>(out.logits.begin(), out.logits.begin() + split), alone_a);
  EXPECT_EQ(std::vector<float>(out.logits.begin() + split, out.logits.end()), alone_b);
}

// One forward of `tokens` at ctx_len for `seq`, every row's logits; rows that all commit
// (kAlwaysKept) advance the recurrent state in place, as the engine's prompt chunks and plain
// steps do.
std::vector<float> ForwardRows(DecoderModel& model, PagedKvCache& cache, int32_t seq,
                               int32_t ctx_len, const std::vector<int32_t>& tokens,
                               SpanRows rows = SpanRows::kVerified) {
  StepBatch batch;
  AddRequestRows(batch, seq, ctx_len, tokens, cache, /*all_logits=*/true, rows);
  ForwardOutput out;
  EXPECT_TRUE(model.Forward(batch, cache, &out).ok());
  return out.logits;
}

// A verify of four rows (the next token, one right draft, two wrong ones) whose first two rows
// are kept leaves the sequence exactly where plain decoding of those two tokens leaves it: the
// verified rows' logits and the next row's have plain decoding's bits (plain decoding's rows run
// in place on the committed state, the verify's on a working copy), whether the kept length is
// committed explicitly (the engine's stage) or at the next forward.
TEST(Qwen3_5ModelTest, RejectedRowsLeaveNothingBehind) {
  const DecoderConfig config = OddHybridConfig();
  DecoderModel model(config, RandomDecoderWeights(config, 6, DType::kBF16));
  const std::vector<int32_t> tokens = testing::RandomTokens(10, config.vocab_size, 8);
  const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + 7);
  const int64_t vocab = config.vocab_size;
  // Plain: the prompt, then tokens 7, 8 and 9 one row at a time.
  PagedKvCache plain_cache(model.KvShape(16, 1).WithDtype(KvDtype::kF32));
  const int32_t plain = plain_cache.AddSequence();
  ASSERT_TRUE(plain_cache.Reserve(plain, 10).ok());
  ForwardRows(model, plain_cache, plain, 0, prompt, SpanRows::kAlwaysKept);
  std::vector<float> want;
  for (int32_t pos = 7; pos < 10; ++pos) {
    const std::vector<float> row =
        ForwardRows(model, plain_cache, plain, pos, {tokens[pos]}, SpanRows::kAlwaysKept);
    want.insert(want.end(), row.begin(), row.end());
  }
  for (const bool explicit_commit : {true, false}) {
    SCOPED_TRACE(explicit_commit ? "committed by the stage" : "committed at the next forward");
    PagedKvCache cache(model.KvShape(16, 1).WithDtype(KvDtype::kF32));
    const int32_t seq = cache.AddSequence();
    ASSERT_TRUE(cache.Reserve(seq, 11).ok());
    ForwardRows(model, cache, seq, 0, prompt);
    const int32_t wrong = (tokens[9] + 1) % static_cast<int32_t>(vocab);
    const std::vector<float> verify =
        ForwardRows(model, cache, seq, 7, {tokens[7], tokens[8], wrong, wrong});
    EXPECT_EQ(std::vector<float>(verify.begin(), verify.begin() + 2 * vocab),
              std::vector<float>(want.begin(), want.begin() + 2 * vocab));
    if (explicit_commit) model.CommitSequenceState(cache, seq, 9);
    const std::vector<float> next = ForwardRows(model, cache, seq, 9, {tokens[9]});
    EXPECT_EQ(next, std::vector<float>(want.begin() + 2 * vocab, want.end()));
  }
}

// Only the full-attention layers keep K/V rows (the linear ones keep their recurrent state), so
// a position costs their K/V alone.
TEST(Qwen3_5ModelTest, KvIsKeptForTheAttentionLayersOnly) {
  const DecoderConfig c = OddHybridConfig();  // layers linear, full, linear, linear, full
  DecoderModel model(c, RandomDecoderWeights(c, 3, DType::kF32));
  const KvCacheShape shape = model.KvShape(16, 4);
  EXPECT_EQ(shape.num_layers, 2);
  EXPECT_EQ(shape.attention_index, (std::vector<int32_t>{-1, 0, -1, -1, 1}));
  PagedKvCache cache(shape.WithDtype(KvDtype::kF32));
  EXPECT_EQ(cache.store().num_layers(), 2);
  // Layer 4's rows are the store's second pair.
  const std::vector<float> k(20, 1.5f), v(20, -2.0f);
  cache.store().Store(4, 7, k.data(), v.data());
  std::vector<float> k_read(20), v_read(20);
  cache.store().Read(4, 7, k_read.data(), v_read.data());
  EXPECT_EQ(k_read, k);
  EXPECT_EQ(v_read, v);
  cache.store().Read(1, 7, k_read.data(), v_read.data());
  EXPECT_EQ(k_read, std::vector<float>(20, 0.0f));
}

// A span's forward copies its state after the positions asked (RecurrentStates::CaptureAfter,
// for the prefix cache): each copy holds the bits of the committed state of a sequence that ran
// only the rows up to it, in any chunks, and the span's own state and logits are unchanged.
TEST(Qwen3_5ModelTest, StatesCapturedInsideASpanEqualThoseOfShorterSequences) {
  const DecoderConfig config = OddHybridConfig();
  DecoderModel model(config, RandomDecoderWeights(config, 6, DType::kBF16));
  const std::vector<int32_t> tokens = testing::RandomTokens(23, config.vocab_size, 9);
  const auto first = [&](int32_t n) {
    return std::vector<int32_t>(tokens.begin(), tokens.begin() + n);
  };
  PagedKvCache cache(model.KvShape(16, 8).WithDtype(KvDtype::kF32));
  RecurrentStates& states = cache.recurrent();
  // One span of 23 rows (a prompt's, in place), captured after 7 and 16 positions and at its end.
  const int32_t whole = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(whole, 23).ok());
  const std::vector<int32_t> at = {7, 16, 23};
  states.CaptureAfter(whole, at);
  const std::vector<float> logits =
      ForwardRows(model, cache, whole, 0, tokens, SpanRows::kAlwaysKept);
  model.CommitSequenceState(cache, whole, 23);
  for (size_t i = 0; i < at.size(); ++i) {
    // The same prefix in two chunks, split before the capture point.
    const int32_t part = cache.AddSequence();
    ASSERT_TRUE(cache.Reserve(part, at[i]).ok());
    const std::vector<int32_t> prefix = first(at[i]);
    ForwardRows(model, cache, part, 0, std::vector<int32_t>(prefix.begin(), prefix.begin() + 3));
    ForwardRows(model, cache, part, 3, std::vector<int32_t>(prefix.begin() + 3, prefix.end()));
    model.CommitSequenceState(cache, part, at[i]);
    const std::span<const float> got = states.CapturedState(whole, i),
                                 want = states.Committed(part);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end())) << "after " << at[i];
  }
  const std::span<const float> end = states.CapturedState(whole, 2),
                               committed = states.Committed(whole);
  EXPECT_TRUE(std::equal(end.begin(), end.end(), committed.begin(), committed.end()));
  states.ClearCaptures(whole);
  // Without captures, on a working copy, the same span gives the same logits.
  const int32_t again = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(again, 23).ok());
  EXPECT_EQ(ForwardRows(model, cache, again, 0, tokens), logits);
}

// The odd hybrid (f32 weights) and a cache with one sequence of 8 positions reserved.
struct OneSequence {
  DecoderConfig config = OddHybridConfig();
  DecoderModel model{config, RandomDecoderWeights(config, 4, DType::kF32)};
  PagedKvCache cache{model.KvShape(16, 2).WithDtype(KvDtype::kF32)};
  int32_t seq = cache.AddSequence();
  bool reserved = cache.Reserve(seq, 8).ok();
};

// A span whose rows all commit runs on the committed state itself (no working copy, no replay
// inputs): committing fewer of its rows is a bug, caught.
TEST(Qwen3_5ModelTest, AnAlwaysKeptSpanCannotBeCommittedShort) {
  OneSequence one;
  ASSERT_TRUE(one.reserved);
  DecoderModel& model = one.model;
  PagedKvCache& cache = one.cache;
  const int32_t seq = one.seq;
  ForwardRows(model, cache, seq, 0, {5, 6, 7}, SpanRows::kAlwaysKept);
  EXPECT_TRUE(cache.recurrent().in_place(seq));
  EXPECT_DEATH(model.CommitSequenceState(cache, seq, 2), "keeps all its rows");
  model.CommitSequenceState(cache, seq, 3);
  EXPECT_EQ(cache.recurrent().position(seq), 3);
}

TEST(Qwen3_5ModelTest, SpanAwayFromTheStatePositionIsABug) {
  OneSequence one;
  ASSERT_TRUE(one.reserved);
  StepBatch batch;
  AddRequestRows(batch, one.seq, 3, std::vector<int32_t>{1, 2}, one.cache, /*all_logits=*/true);
  ForwardOutput out;
  EXPECT_DEATH((void)one.model.Forward(batch, one.cache, &out), "recurrent state's position");
}

}  // namespace
}  // namespace dscale
