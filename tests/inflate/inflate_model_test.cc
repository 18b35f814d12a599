// Inflated pairs against their sources, one forward at a time: the target's logits at every
// position, the drafter's logits and candidates, and the pad rows, for random pairs at every kind
// of shape change and for the bundled trained pair.

#include <gtest/gtest.h>

#include <cmath>

#include "inflate_test_util.h"

namespace dscale {
namespace {

using test_util::ScopedTempDir;
using testing::PairDirs;
using testing::RandomTokens;

struct Loaded {
  std::unique_ptr<Qwen3Model> target;
  std::unique_ptr<DFlashDrafter> drafter;
};

Loaded Load(const PairDirs& dirs) {
  Loaded m;
  Result<Qwen3Model> target = Qwen3Model::Load(dirs.target);
  EXPECT_TRUE(target.ok()) << target.status().message();
  if (!target.ok()) return m;
  m.target = std::make_unique<Qwen3Model>(std::move(*target));
  Result<DFlashDrafter> drafter = DFlashDrafter::Load(dirs.drafter, *m.target);
  EXPECT_TRUE(drafter.ok()) << drafter.status().message();
  if (drafter.ok()) m.drafter = std::make_unique<DFlashDrafter>(std::move(*drafter));
  return m;
}

// Every real logit within the pair bound, the same greedy token wherever the small model's top
// two are not a float-noise tie, and every pad logit kPadLogitMargin below the row's top.
void ExpectSameRows(const std::vector<float>& small, const std::vector<float>& large, int64_t vocab,
                    int64_t large_vocab, const std::vector<double>& bounds,
                    const std::string& what) {
  const int64_t rows = static_cast<int64_t>(small.size()) / vocab;
  ASSERT_EQ(static_cast<int64_t>(large.size()), rows * large_vocab) << what;
  const float tie = testing::GreedyTieTolerance(bounds);
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = small.data() + r * vocab;
    const float* l = large.data() + r * large_vocab;
    for (int64_t v = 0; v < vocab; ++v) {
      ASSERT_LE(std::fabs(double{s[v]} - l[v]), bounds[v])
          << what << " row " << r << " token " << v;
    }
    const int64_t small_top = std::max_element(s, s + vocab) - s;
    const int64_t large_top = std::max_element(l, l + large_vocab) - l;
    if (testing::TopGap(s, vocab) > tie) {
      EXPECT_EQ(large_top, small_top) << what << " row " << r;
    }
    for (int64_t v = vocab; v < large_vocab; ++v) {
      ASSERT_LE(double{l[v]}, double{s[small_top]} - kPadLogitMargin) << what << " pad " << v;
    }
  }
}

// Inflates `source` to `shape` and compares target logits on two prompts (one past a KV page)
// and a draft after each, with K/V cached as each of `caches`.
void CheckInflation(const PairDirs& source, const InflateShape& shape, const std::string& what,
                    std::initializer_list<KvDtype> caches = {KvDtype::kF32}) {
  ScopedTempDir out_dir;
  const PairDirs out{out_dir.File("target"), out_dir.File("drafter")};
  Result<InflateResult> result = testing::InflatePair(source, out, shape);
  ASSERT_TRUE(result.ok()) << what << ": " << result.status().message();
  Loaded small = Load(source);
  Loaded large = Load(out);
  ASSERT_TRUE(small.drafter && large.drafter) << what;
  const int64_t vocab = small.target->config().vocab_size;
  const int64_t large_vocab = large.target->config().vocab_size;
  EXPECT_EQ(large.target->config().hidden_size, shape.hidden_size) << what;
  EXPECT_EQ(large.target->config().num_hidden_layers, shape.num_hidden_layers) << what;
  for (const KvDtype kv : caches) {
    for (const int32_t length : {21, 37}) {
      const std::vector<int32_t> tokens = RandomTokens(length, vocab - 2, 7 + length);
      const std::string where = what + ", " + std::to_string(length) + " tokens, " +
                                std::string(KvDtypeName(kv)) + " K/V";
      ExpectSameRows(testing::RunPrefill(*small.target, tokens, kv).logits,
                     testing::RunPrefill(*large.target, tokens, kv).logits, vocab, large_vocab,
                     testing::TargetPairBounds(*small.target, *large.target, length, kv), where);
      const DraftOutput small_draft =
          testing::RunDraft(*small.target, *small.drafter, tokens, 5, kv);
      const DraftOutput large_draft =
          testing::RunDraft(*large.target, *large.drafter, tokens, 5, kv);
      ExpectSameRows(small_draft.logits, large_draft.logits, vocab, large_vocab,
                     testing::DraftPairBounds(*small.drafter, *small.target, *large.drafter,
                                              *large.target, length, kv),
                     where + ", draft");
    }
  }
}

class InflateRandomPairTest : public ::testing::Test {
 protected:
  PairDirs Write(const Qwen3Config& config, DType dtype) {
    return testing::WriteRandomPair(source_.File(DTypeName(dtype).data()), config, 11, dtype);
  }
  ScopedTempDir source_;
};

// Hidden 72 → 144, intermediate 100 → 130, layers 3 → 8 (feature layers {0, 2} move to {1, 5}),
// heads 4/2 → 8/4, head_dim 32 → 64, vocab 131 → 160, draft layers 2 → 3.
TEST_F(InflateRandomPairTest, EveryDimensionAtOnce) {
  const Qwen3Config config = testing::OddTinyConfig();
  InflateShape shape{.hidden_size = 144,
                     .intermediate_size = 130,
                     .num_hidden_layers = 8,
                     .num_attention_heads = 8,
                     .num_key_value_heads = 4,
                     .head_dim = 64,
                     .vocab_size = 160,
                     .tie_word_embeddings = false,
                     .draft_layers = 3};
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    CheckInflation(Write(config, dtype), shape, std::string(DTypeName(dtype)));
  }
}

// Groups of two query heads regrouped into groups of one (each KV head copied), head_dim 32 → 48
// (rope_theta adapted: no index of the larger head has every frequency otherwise).
TEST_F(InflateRandomPairTest, RegroupedHeadsAndAnOddHeadDim) {
  const Qwen3Config config = testing::OddTinyConfig();
  InflateShape shape = ShapeOf(config);
  shape.hidden_size = 90;
  shape.num_attention_heads = 6;
  shape.num_key_value_heads = 6;
  shape.head_dim = 48;
  shape.vocab_size = 140;
  CheckInflation(Write(config, DType::kBF16), shape, "regrouped");
}

// A tied source, inflated tied (the LM head is the λ-scaled embedding) and untied; the head dim
// unchanged, so only the hidden width sets λ.
TEST_F(InflateRandomPairTest, TiedSources) {
  Qwen3Config config = testing::OddTinyConfig();
  config.tie_word_embeddings = true;
  const PairDirs source = Write(config, DType::kBF16);
  InflateShape shape = ShapeOf(config);
  shape.hidden_size = 100;
  shape.vocab_size = 150;
  shape.num_hidden_layers = 4;
  CheckInflation(source, shape, "tied");
  shape.tie_word_embeddings = false;
  CheckInflation(source, shape, "tied to untied");
}

// The width unchanged: no constants, no residual scale; depth, heads and MLP grow.
TEST_F(InflateRandomPairTest, SameWidth) {
  const Qwen3Config config = testing::OddTinyConfig();
  InflateShape shape = ShapeOf(config);
  shape.num_hidden_layers = 6;
  shape.intermediate_size = 160;
  shape.num_attention_heads = 8;
  shape.num_key_value_heads = 2;
  CheckInflation(Write(config, DType::kF32), shape, "same width");
}

// The bundled trained pair (hidden 256, 6 layers, 4/2 heads × 64, vocab 4160, untied) at a small
// shape with every kind of change, with f32 and BF16 KV caches.
TEST(InflateBundledPairTest, LogitsAndDraftsMatch) {
  const PairDirs bundled{std::string(DSCALE_MODELS_DIR) + "/tiny-target",
                         std::string(DSCALE_MODELS_DIR) + "/tiny-dflash"};
  InflateShape shape{.hidden_size = 384,
                     .intermediate_size = 700,
                     .num_hidden_layers = 9,
                     .num_attention_heads = 8,
                     .num_key_value_heads = 4,
                     .head_dim = 128,
                     .vocab_size = 4224,
                     .tie_word_embeddings = false,
                     .draft_layers = 2};
  CheckInflation(bundled, shape, "bundled", {KvDtype::kF32, KvDtype::kBf16});
}

}  // namespace
}  // namespace dscale
