// Inflated pairs against their sources, one forward at a time: the target's logits at every
// position, the drafter's logits and candidates, and the pad rows, for random pairs at every kind
// of shape change and for the bundled trained pair.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "budget/confidence_survival.h"
#include "dvl/predictor.h"
#include "inflate/inflate_checkpoint.h"
#include "inflate_test_util.h"
#include "io/file_util.h"
#include "model/dspark_head.h"

namespace dscale {
namespace {

using test_util::ScopedTempDir;
using testing::PairDirs;
using testing::RandomTokens;

struct Loaded {
  std::unique_ptr<DecoderModel> target;
  std::unique_ptr<DFlashDrafter> drafter;
};

Loaded Load(const PairDirs& dirs, DrafterHead head = DrafterHead::kNone) {
  Loaded m;
  Result<DecoderModel> target = DecoderModel::Load(dirs.target);
  EXPECT_TRUE(target.ok()) << target.status().message();
  if (!target.ok()) return m;
  m.target = std::make_unique<DecoderModel>(std::move(*target));
  Result<DFlashDrafter> drafter = DFlashDrafter::Load(dirs.drafter, *m.target, head);
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

// A head's inputs from the embedding side are bit-identical in both pairs (a Domino GRU's λ·e
// against W/λ, a DSpark head's W1 rows: exact copies and power-of-two scalings) and so are its
// weights; only the final-normed row z (h) differs, by the backbone's float noise (relative ~1e-6
// of |z| ≤ √d·max|g|), through projections of O(1) gain (and σ, tanh, whose slopes are at most 1).
// 1e-3 absolute on top of the backbone's bound, for corrected logits and for a DSpark head's
// confidence logits, is far above that and far below a logit gap that matters.
constexpr double kHeadTolerance = 1e-3;

// Inflates `source` to `shape` and compares target logits on two prompts (one past a KV page)
// and a draft after each, with K/V cached as each of `caches`.
// With `head` = kDomino, or a DSpark drafter, the drafts are the head's: the same proposals at
// every position, corrected logits within the backbone's pair bound plus kHeadTolerance, and a
// DSpark confidence head's logits within kHeadTolerance. `check_output` looks at the files.
void CheckInflation(const PairDirs& source, const InflateShape& shape, const std::string& what,
                    std::initializer_list<KvDtype> caches = {KvDtype::kF32},
                    DrafterHead head = DrafterHead::kNone,
                    const std::function<void(const PairDirs&)>& check_output = {}) {
  ScopedTempDir out_dir;
  const PairDirs out{out_dir.File("target"), out_dir.File("drafter")};
  Result<InflateResult> result = testing::InflatePair(source, out, shape);
  ASSERT_TRUE(result.ok()) << what << ": " << result.status().message();
  Loaded small = Load(source, head);
  Loaded large = Load(out, head);
  ASSERT_TRUE(small.drafter && large.drafter) << what;
  if (check_output) check_output(out);
  const bool head_drafts = head == DrafterHead::kDomino || small.drafter->dspark_head() != nullptr;
  const int64_t vocab = small.target->config().vocab_size;
  const int64_t large_vocab = large.target->config().vocab_size;
  EXPECT_EQ(large.target->config().hidden_size, shape.hidden_size) << what;
  EXPECT_EQ(large.target->config().num_hidden_layers, shape.num_hidden_layers) << what;
  // Every predictor of the source drafter is inflated for the large width, none copied as is.
  for (const char* name : kPredictorFileNames) {
    if (!PathExists(JoinPath(source.drafter, name))) continue;
    EXPECT_NE(std::find(result->drafters[0].predictors.begin(),
                        result->drafters[0].predictors.end(), name),
              result->drafters[0].predictors.end())
        << what << ": " << name;
    EXPECT_TRUE(dvl::Predictor::Load(
                    JoinPath(out.drafter, name),
                    {.hidden_size = large.target->config().hidden_size, .vocab_size = large_vocab})
                    .ok())
        << what << ": " << name << " does not load at the large width";
  }
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
      std::vector<double> bounds = testing::DraftPairBounds(
          *small.drafter, *small.target, *large.drafter, *large.target, length, kv);
      if (head_drafts) {
        for (double& b : bounds) b += kHeadTolerance;
        EXPECT_EQ(large_draft.tokens, small_draft.tokens) << where << ", head proposals";
      }
      ASSERT_EQ(large_draft.confidence.size(), small_draft.confidence.size()) << where;
      for (size_t k = 0; k < small_draft.confidence.size(); ++k) {
        EXPECT_NEAR(large_draft.confidence[k], small_draft.confidence[k], kHeadTolerance)
            << where << ", confidence " << k;
      }
      ExpectSameRows(small_draft.logits, large_draft.logits, vocab, large_vocab, bounds,
                     where + ", draft");
    }
  }
}

class InflateRandomPairTest : public ::testing::Test {
 protected:
  PairDirs Write(const DecoderConfig& config, DType dtype) {
    return testing::WriteRandomPair(source_.File(DTypeName(dtype).data()), config, 11, dtype);
  }
  ScopedTempDir source_;
};

// Hidden 72 → 144, intermediate 100 → 130, layers 3 → 8 (feature layers {0, 2} move to {1, 5}),
// heads 4/2 → 8/4, head_dim 32 → 64, vocab 131 → 160, draft layers 2 → 3: from OddTinyConfig.
InflateShape EveryDimensionShape() {
  return {.hidden_size = 144,
          .intermediate_size = 130,
          .num_hidden_layers = 8,
          .num_attention_heads = 8,
          .num_key_value_heads = 4,
          .head_dim = 64,
          .vocab_size = 160,
          .tie_word_embeddings = false,
          .draft_layers = 3};
}

TEST_F(InflateRandomPairTest, EveryDimensionAtOnce) {
  const DecoderConfig config = testing::OddTinyConfig();
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    CheckInflation(Write(config, dtype), EveryDimensionShape(), std::string(DTypeName(dtype)));
  }
}

// Groups of two query heads regrouped into groups of one (each KV head copied), head_dim 32 → 48
// (rope_theta adapted: no index of the larger head has every frequency otherwise).
TEST_F(InflateRandomPairTest, RegroupedHeadsAndAnOddHeadDim) {
  const DecoderConfig config = testing::OddTinyConfig();
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
  DecoderConfig config = testing::OddTinyConfig();
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
  const DecoderConfig config = testing::OddTinyConfig();
  InflateShape shape = ShapeOf(config);
  shape.num_hidden_layers = 6;
  shape.intermediate_size = 160;
  shape.num_attention_heads = 8;
  shape.num_key_value_heads = 2;
  CheckInflation(Write(config, DType::kF32), shape, "same width");
}

// A random Llama 3 pair (no q/k norms, llama3 RoPE scaling) inflated in every dimension: the
// attention scale goes on q_proj (√2 for 32 → 64, written as F32; ×2 for 32 → 128, exact in
// BF16), and the scaled RoPE frequencies carry over through the head-dim map.
TEST_F(InflateRandomPairTest, LlamaTargets) {
  DecoderConfig config = testing::AsLlama3(testing::OddTinyConfig(), 500000.0, 16);
  InflateShape shape = EveryDimensionShape();
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    CheckInflation(Write(config, dtype), shape, "llama " + std::string(DTypeName(dtype)));
  }
  config.tie_word_embeddings = true;
  shape.head_dim = 128;
  shape.tie_word_embeddings = true;
  CheckInflation(Write(config, DType::kBF16), shape, "llama tied, head_dim x4");
}

// A random pair with a Domino head (G 23, B 13) in its drafter folder, inflated in every
// dimension, untied and tied (the head's z columns then carry λ): the head drafts the same tokens.
TEST_F(InflateRandomPairTest, DominoHeadDraftsTheSameTokens) {
  for (const bool tied : {false, true}) {
    DecoderConfig config = testing::OddTinyConfig();
    config.tie_word_embeddings = tied;
    const std::string dir = source_.File(tied ? "domino-tied" : "domino");
    const PairDirs source{dir + "/target", dir + "/drafter"};
    ASSERT_TRUE(WriteRandomCheckpoint(source.target, config, 21, DType::kBF16).ok());
    DFlashConfig drafter = testing::TestDrafterConfig(config);
    drafter.domino = testing::OddHeadConfig();
    ASSERT_TRUE(
        WriteRandomDFlashCheckpoint(source.drafter, drafter, config.hidden_size, 22, DType::kBF16)
            .ok());
    ASSERT_TRUE(WriteRandomDominoHead(source.drafter, *drafter.domino, config.hidden_size,
                                      config.vocab_size, 23, DType::kBF16)
                    .ok());
    InflateShape shape = ShapeOf(config);
    shape.hidden_size = 144;
    shape.num_hidden_layers = 5;
    shape.intermediate_size = 130;
    shape.vocab_size = 160;
    shape.tie_word_embeddings = tied;
    CheckInflation(source, shape, tied ? "domino, tied" : "domino", {KvDtype::kF32},
                   DrafterHead::kDomino);
  }
}

// A declared head whose file does not fit the source pair is refused before anything is written,
// naming the file, the tensor and the shape expected.
TEST_F(InflateRandomPairTest, RefusesAHeadFileOfTheWrongShape) {
  const DecoderConfig config = testing::OddTinyConfig();
  const std::string dir = source_.File("bad-head");
  const PairDirs source{dir + "/target", dir + "/drafter"};
  ASSERT_TRUE(WriteRandomCheckpoint(source.target, config, 31, DType::kF32).ok());
  DFlashConfig drafter = testing::TestDrafterConfig(config);
  drafter.domino = testing::OddHeadConfig();
  ASSERT_TRUE(
      WriteRandomDFlashCheckpoint(source.drafter, drafter, config.hidden_size, 32, DType::kF32)
          .ok());
  ASSERT_TRUE(WriteRandomDominoHead(source.drafter, *drafter.domino, config.hidden_size + 1,
                                    config.vocab_size, 33, DType::kF32)
                  .ok());
  ScopedTempDir out_dir;
  InflateShape shape = ShapeOf(config);
  shape.hidden_size = 144;
  const Result<InflateResult> result =
      testing::InflatePair(source, {out_dir.File("target"), out_dir.File("drafter")}, shape);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("domino_head.safetensors"), std::string::npos)
      << result.status().message();
  EXPECT_NE(result.status().message().find("gru.weight_ih_l0"), std::string::npos)
      << result.status().message();
  EXPECT_FALSE(std::filesystem::exists(out_dir.File("target") + "/config.json"));
}

// What a DSpark output holds besides its function: DeepSpec's layout (the source's heads and
// drafting fields at the top level of config.json), the embedding and LM head copies equal to the
// large target's own tensors, and the source's confidence calibration as it was.
void ExpectDeepSpecOutput(const PairDirs& source, const PairDirs& out) {
  auto config = [](const std::string& dir) {
    return nlohmann::json::parse(ReadFileToString(dir + "/config.json").value());
  };
  const nlohmann::json small = config(source.drafter), large = config(out.drafter);
  EXPECT_EQ(large["architectures"], nlohmann::json::array({kDSparkArchitecture}));
  EXPECT_FALSE(large.contains("dflash_config"));
  for (const char* field : {"block_size", "mask_token_id", "markov_rank", "markov_head_type",
                            "enable_confidence_head", "confidence_head_with_markov"}) {
    EXPECT_EQ(large.value(field, nlohmann::json()), small.value(field, nlohmann::json())) << field;
  }
  const DecoderConfig t = LoadDecoderConfig(out.target + "/config.json").value();
  const Checkpoint target = Checkpoint::Open(out.target).value();
  const Checkpoint drafter = Checkpoint::Open(out.drafter).value();
  const std::vector<int64_t> shape{t.vocab_size, t.hidden_size};
  const char* lm_head = t.tie_word_embeddings ? kTargetEmbedName : kTargetLmHeadName;
  for (const auto& [copy, original] : {std::pair{kDSparkEmbedCopyName, kTargetEmbedName},
                                       std::pair{kDSparkLmHeadCopyName, lm_head}}) {
    ASSERT_NE(drafter.Find(copy), nullptr) << copy;
    EXPECT_EQ(drafter.Find(copy)->dtype, target.Find(original)->dtype) << copy;
    EXPECT_EQ(drafter.ReadF32(copy, shape).value(), target.ReadF32(original, shape).value())
        << copy;
  }
  const std::string calibration = std::string("/") + budget::kConfidenceCalibrationFile;
  EXPECT_EQ(PathExists(out.drafter + calibration), PathExists(source.drafter + calibration));
  if (PathExists(source.drafter + calibration)) {
    EXPECT_EQ(ReadFileToString(out.drafter + calibration).value(),
              ReadFileToString(source.drafter + calibration).value());
  }
}

// A random DSpark pair (B = 7, rank 5) with every kind of head (EveryDSparkHeadKind), inflated in
// every dimension: the same proposals, corrected and confidence logits within the stated bounds,
// in DeepSpec's layout. Its calibration and predictor are carried (copied; inflated).
TEST_F(InflateRandomPairTest, DSparkHeadsDraftTheSameTokens) {
  const DecoderConfig config = testing::OddTinyConfig();
  uint64_t seed = 41;
  for (const DSparkHeadConfig& heads : testing::EveryDSparkHeadKind(5)) {
    const std::string what = "dspark, " + testing::DescribeHeads(heads);
    const PairDirs source = testing::WriteRandomDSparkPair(
        source_.File("dspark-" + std::to_string(seed)), config,
        testing::TestDSparkConfig(config, heads, 7), seed, DType::kBF16);
    seed += 2;
    if (heads.confidence_head) {
      const budget::ConfidenceCalibration calibration{.temperatures = std::vector<float>(7, 1.5f)};
      ASSERT_TRUE(budget::SaveConfidenceCalibration(
                      calibration, source.drafter + "/" + budget::kConfidenceCalibrationFile)
                      .ok());
    }
    ASSERT_TRUE(testing::RandomPredictor(config.hidden_size, config.vocab_size, seed)
                    .Save(source.drafter + "/predictor.bin")
                    .ok());
    CheckInflation(source, EveryDimensionShape(), what, {KvDtype::kF32}, DrafterHead::kNone,
                   [&](const PairDirs& out) { ExpectDeepSpecOutput(source, out); });
  }
}

// Tied DSpark pairs (F32), inflated tied, where h comes out as z/λ and the columns that read it
// carry λ, and untied; every Markov head type with the confidence head on h and e.
TEST_F(InflateRandomPairTest, DSparkHeadsOfTiedPairs) {
  DecoderConfig config = testing::OddTinyConfig();
  config.tie_word_embeddings = true;
  InflateShape shape = ShapeOf(config);
  shape.hidden_size = 100;
  shape.vocab_size = 150;
  shape.num_hidden_layers = 5;
  uint64_t seed = 61;
  for (const MarkovHeadType type :
       {MarkovHeadType::kVanilla, MarkovHeadType::kGated, MarkovHeadType::kRnn}) {
    const DSparkHeadConfig heads{.markov_rank = 6,
                                 .markov_head_type = type,
                                 .confidence_head = true,
                                 .confidence_with_markov = true};
    const PairDirs source = testing::WriteRandomDSparkPair(
        source_.File("dspark-tied-" + std::to_string(seed)), config,
        testing::TestDSparkConfig(config, heads, 6), seed, DType::kF32);
    seed += 2;
    const std::string what = "dspark tied, " + testing::DescribeHeads(heads);
    for (const bool tie : {true, false}) {
      shape.tie_word_embeddings = tie;
      CheckInflation(source, shape, what + (tie ? "" : ", to untied"), {KvDtype::kF32},
                     DrafterHead::kNone,
                     [&](const PairDirs& out) { ExpectDeepSpecOutput(source, out); });
    }
  }
}

// The bundled trained pair (hidden 384, 8 layers, 6/2 heads × 64, vocab 4160, untied; a 2-layer
// drafter) at a small shape with every kind of change, with f32 and BF16 KV caches.
TEST(InflateBundledPairTest, LogitsAndDraftsMatch) {
  const PairDirs bundled{std::string(DSCALE_MODELS_DIR) + "/tiny-target",
                         std::string(DSCALE_MODELS_DIR) + "/tiny-dflash"};
  InflateShape shape{.hidden_size = 512,
                     .intermediate_size = 1100,
                     .num_hidden_layers = 9,
                     .num_attention_heads = 8,
                     .num_key_value_heads = 4,
                     .head_dim = 128,
                     .vocab_size = 4224,
                     .tie_word_embeddings = false,
                     .draft_layers = 3};
  CheckInflation(bundled, shape, "bundled", {KvDtype::kF32, KvDtype::kBf16});
}

// The bundled pair with its trained Domino head (G 128, B 64) at a small custom shape.
TEST(InflateBundledPairTest, DominoHeadDraftsTheSameTokens) {
  const PairDirs bundled{std::string(DSCALE_MODELS_DIR) + "/tiny-target",
                         std::string(DSCALE_MODELS_DIR) + "/tiny-dflash"};
  // Only the width and the vocabulary grow (the other dimensions are covered above), to keep the
  // test short.
  InflateShape shape{.hidden_size = 512,
                     .intermediate_size = 1024,
                     .num_hidden_layers = 8,
                     .num_attention_heads = 6,
                     .num_key_value_heads = 2,
                     .head_dim = 64,
                     .vocab_size = 4224,
                     .tie_word_embeddings = false};
  CheckInflation(bundled, shape, "bundled with its head", {KvDtype::kF32}, DrafterHead::kDomino);
}

}  // namespace
}  // namespace dscale
