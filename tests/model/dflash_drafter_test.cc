#include "model/dflash_drafter.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <set>

#include "float_bounds.h"
#include "logit_bounds.h"
#include "model/draft_vocab.h"
#include "model/random_checkpoint.h"
#include "reference_drafter.h"
#include "support/tiny_models.h"

namespace dscale {
namespace {

using testing::OddTinyConfig;
using testing::RandomTokens;

constexpr int32_t kBlock = 16;

class DFlashDrafterTest : public ::testing::Test {
 protected:
  DFlashDrafterTest()
      : target_(OddTinyConfig(), RandomDecoderWeights(OddTinyConfig(), 3, DType::kF32)),
        drafter_(testing::RandomDrafter(target_, 4)) {}

  // Sets the batch's tile and captures the drafter's feature layers.
  void Capture(StepBatch& batch, int tile) const {
    batch.tile_rows = tile;
    batch.capture_layers = drafter_->feature_layers();
  }

  // Prefills tokens[from, to) of `seq` and appends their features to the draft context.
  void PrefillRange(PagedKvCache& cache, int32_t seq, const std::vector<int32_t>& tokens,
                    int32_t from, int32_t to) {
    StepBatch batch;
    AddRequestRows(batch, seq, from, std::span(tokens).subspan(from, to - from), cache, false);
    ForwardOutput out;
    Capture(batch, 128);
    ASSERT_TRUE(target_.Forward(batch, cache, &out).ok());
    drafter_->AppendContext(
        {.features = out.features, .positions = batch.positions(), .slots = batch.kv_slots()});
  }

  DraftOutput DraftAt(PagedKvCache& cache, int32_t seq, int32_t ctx, int32_t anchor) {
    DraftOutput out;
    const DraftRequest request{.seq = seq, .ctx_len = ctx, .anchor = anchor};
    EXPECT_TRUE(drafter_->Draft(std::span(&request, 1), cache, 16, &out).ok());
    return out;
  }

  // The drafts from anchor 7 after a prompt of 10 random tokens (from `seed`), on a fresh cache.
  DraftOutput DraftAfterPrompt(uint32_t seed) {
    const std::vector<int32_t> tokens = RandomTokens(10, 129, seed);
    PagedKvCache cache(target_.KvShape(5, 16).WithDtype(KvDtype::kF32));
    drafter_->Bind(cache);
    const int32_t seq = cache.AddSequence();
    EXPECT_TRUE(cache.Reserve(seq, 10 + kBlock).ok());
    PrefillRange(cache, seq, tokens, 0, 10);
    return DraftAt(cache, seq, 10, 7);
  }

  // A random BF16 drafter of the test config for this target (hidden 72, seed 4), written to a
  // directory of the temporary folder named after `name` and this process; the test removes it.
  std::string WriteTestDrafter(const std::string& name) {
    const std::string dir =
        (std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid())))
            .string();
    EXPECT_TRUE(WriteRandomDFlashCheckpoint(dir, testing::TestDrafterConfig(target_.config()), 72,
                                            4, DType::kBF16)
                    .ok());
    return dir;
  }

  DecoderModel target_;
  std::unique_ptr<DFlashDrafter> drafter_;
};

TEST_F(DFlashDrafterTest, DraftShapes) {
  const DraftOutput out = DraftAfterPrompt(1);
  EXPECT_EQ(out.candidates, kBlock - 1);
  ASSERT_EQ(out.tokens.size(), 15u);
  EXPECT_EQ(out.logits.size(), 15u * 131);
  EXPECT_EQ(out.hidden.size(), 15u * 72);
  for (int32_t j = 0; j < 15; ++j) {
    const auto row = out.logits.begin() + j * 131;
    EXPECT_EQ(std::max_element(row, row + 131) - row, out.tokens[j]) << "candidates are greedy";
  }
}

// A call whose requests read fewer candidates (DraftRequest::candidates, a fixed:K policy's K −
// 1) scores the most any of them asks, and those candidates are the whole block's, bit for bit:
// the rest of the block still runs through the layers; only its LM head rows are left out.
TEST_F(DFlashDrafterTest, CandidatesAskedForAreTheWholeBlocksFirstOnes) {
  PagedKvCache cache(target_.KvShape(5, 16).WithDtype(KvDtype::kF32));
  drafter_->Bind(cache);
  std::vector<DraftRequest> requests;
  for (uint32_t seed : {11u, 12u}) {
    const std::vector<int32_t> tokens = RandomTokens(10, 129, seed);
    const int32_t seq = cache.AddSequence();
    ASSERT_TRUE(cache.Reserve(seq, 10 + kBlock).ok());
    PrefillRange(cache, seq, tokens, 0, 10);
    requests.push_back({.seq = seq, .ctx_len = 10, .anchor = static_cast<int32_t>(seed)});
  }
  const auto draft = [&](int32_t first_asks, int32_t second_asks) {
    requests[0].candidates = first_asks;
    requests[1].candidates = second_asks;
    DraftOutput out;
    EXPECT_TRUE(drafter_->Draft(requests, cache, 16, &out).ok());
    return out;
  };
  const DraftOutput whole = draft(0, 0);
  ASSERT_EQ(whole.candidates, kBlock - 1);
  const int64_t vocab = drafter_->draft_vocab_size();
  const auto hidden = static_cast<int64_t>(whole.hidden.size()) / (2 * whole.candidates);
  for (const auto& [asks, scored] :
       {std::pair{std::pair{3, 5}, 5}, {{1, 1}, 1}, {{3, 0}, 15}, {{2, 40}, 15}}) {
    const DraftOutput part = draft(asks.first, asks.second);
    ASSERT_EQ(part.candidates, scored) << asks.first << ", " << asks.second;
    ASSERT_EQ(part.tokens.size(), 2u * scored);
    ASSERT_EQ(part.logits.size(), 2u * scored * vocab);
    ASSERT_EQ(part.hidden.size(), 2u * scored * hidden);
    for (int64_t q = 0; q < 2; ++q) {
      for (int64_t j = 0; j < scored; ++j) {
        const int64_t at = q * scored + j, in_whole = q * whole.candidates + j;
        EXPECT_EQ(part.tokens[at], whole.tokens[in_whole]) << q << ", " << j;
        EXPECT_TRUE(std::equal(part.logits.begin() + at * vocab,
                               part.logits.begin() + (at + 1) * vocab,
                               whole.logits.begin() + in_whole * vocab))
            << "logits of request " << q << ", candidate " << j;
        EXPECT_TRUE(std::equal(part.hidden.begin() + at * hidden,
                               part.hidden.begin() + (at + 1) * hidden,
                               whole.hidden.begin() + in_whole * hidden))
            << "hidden row of request " << q << ", candidate " << j;
      }
    }
  }
}

// The draft logits are lm_head() applied to DraftOutput::hidden and nothing more: what the DVL
// features rely on when they fold their logit projection through the head
// (dvl::FoldLogitProjection). Each logit within a float dot product's bound of the exact one.
TEST_F(DFlashDrafterTest, DraftLogitsAreTheHeadsProductsOfTheHiddenRows) {
  const DraftOutput out = DraftAfterPrompt(6);
  ASSERT_FALSE(drafter_->conditions_on_candidates());
  const WeightMatrix& head = drafter_->lm_head();
  const int64_t vocab = drafter_->draft_vocab_size(), hidden = head.cols();
  ASSERT_EQ(head.rows(), vocab);
  ASSERT_EQ(out.hidden.size(), static_cast<size_t>(out.candidates * hidden));
  std::vector<float> w(hidden);
  for (int64_t v = 0; v < vocab; ++v) {
    head.RowToF32(v, w.data());
    for (int32_t j = 0; j < out.candidates; ++j) {
      double exact = 0.0, mass = 0.0;
      for (int64_t i = 0; i < hidden; ++i) {
        const double term = double{out.hidden[j * hidden + i]} * w[i];
        exact += term;
        mass += std::abs(term);
      }
      ASSERT_NEAR(out.logits[j * vocab + v], exact, testing::FloatGamma(hidden + 1) * mass)
          << "token " << v << ", candidate " << j;
    }
  }
}

// The draft context built by one prefill equals the one built through many verify-and-commit
// steps (each verifying a 16-row block with rejected rows, and drafting in between, which writes
// transient block K/V past the committed length).
TEST_F(DFlashDrafterTest, DraftCacheIsTheSameThroughPrefillOrCommits) {
  const int32_t length = 37;
  const std::vector<int32_t> context = RandomTokens(length, 129, 2);
  const int32_t anchor = 11;

  PagedKvCache one(target_.KvShape(5, 32).WithDtype(KvDtype::kF32));
  drafter_->Bind(one);
  const int32_t seq_one = one.AddSequence();
  ASSERT_TRUE(one.Reserve(seq_one, length + kBlock).ok());
  PrefillRange(one, seq_one, context, 0, length);
  const DraftOutput expected = DraftAt(one, seq_one, length, anchor);

  PagedKvCache many(target_.KvShape(5, 32).WithDtype(KvDtype::kF32));
  drafter_->Bind(many);
  const int32_t seq = many.AddSequence();
  ASSERT_TRUE(many.Reserve(seq, 7).ok());
  PrefillRange(many, seq, context, 0, 7);
  std::mt19937 rng(5);
  for (int32_t pos = 7; pos < length;) {
    ASSERT_TRUE(many.Reserve(seq, pos + kBlock).ok());
    DraftAt(many, seq, pos, context[pos]);  // transient block K/V at pos .. pos + 15
    const int32_t commit = std::min<int32_t>(1 + rng() % 5, length - pos);
    std::vector<int32_t> block(context.begin() + pos, context.begin() + pos + commit);
    while (block.size() < kBlock) block.push_back(static_cast<int32_t>(rng() % 129));
    StepBatch batch;
    AddRequestRows(batch, seq, pos, block, many, true);
    ForwardOutput out;
    Capture(batch, 16);
    ASSERT_TRUE(target_.Forward(batch, many, &out).ok());
    const int64_t width = drafter_->feature_width();
    drafter_->AppendContext({.features = std::span(out.features).first(commit * width),
                             .positions = batch.positions().first(commit),
                             .slots = batch.kv_slots().first(commit)});
    pos += commit;
  }
  ASSERT_TRUE(many.Reserve(seq, length + kBlock).ok());
  const DraftOutput got = DraftAt(many, seq, length, anchor);
  // The two histories compute the target's features and the draft K/V in batches of other
  // shapes, and every kernel gives a row the same bits whatever rows share its call: the same
  // logits, bit for bit, so the same candidates.
  ASSERT_EQ(got.logits.size(), expected.logits.size());
  for (size_t i = 0; i < got.logits.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(got.logits[i]), std::bit_cast<uint32_t>(expected.logits[i]))
        << "logit " << i << ": " << got.logits[i] << " against " << expected.logits[i];
  }
  EXPECT_EQ(got.tokens, expected.tokens);
}

// The drafter's candidates against the float64 reference (reference_drafter.h) for the
// original layout and the newer drafters' ones: causal sliding-window layers beside full ones
// with scaled embeddings (LayeredTestDrafterConfig), non-causal windows (is_causal false), and
// causal full layers (is_causal true). The windows (5, and 2, shorter than the block) cut into
// both the context and the block.
TEST_F(DFlashDrafterTest, DraftsEqualTheFloat64ReferenceInEveryLayerLayout) {
  const DFlashConfig layered = testing::LayeredTestDrafterConfig(target_.config());
  DFlashConfig non_causal = layered;
  non_causal.is_causal = false;
  non_causal.sliding_window = 2;
  DFlashConfig causal = testing::TestDrafterConfig(target_.config());
  causal.is_causal = true;
  const std::vector<std::pair<std::string, DFlashConfig>> layouts = {
      {"original", testing::TestDrafterConfig(target_.config())},
      {"sliding causal + full, scaled", layered},
      {"sliding non-causal, scaled", non_causal},
      {"causal full", causal}};
  const int32_t length = 29, anchor = 17;
  const std::vector<int32_t> context = RandomTokens(length, 131, 8);
  for (const auto& [name, config] : layouts) {
    SCOPED_TRACE(name);
    drafter_ = testing::RandomDrafter(target_, 6, config);
    EXPECT_EQ(drafter_->config().IsPlainLayout(), name == "original");
    PagedKvCache cache(target_.KvShape(5, 16).WithDtype(KvDtype::kF32));
    drafter_->Bind(cache);
    const int32_t seq = cache.AddSequence();
    ASSERT_TRUE(cache.Reserve(seq, length + kBlock).ok());
    PrefillRange(cache, seq, context, 0, length);
    const DraftOutput got = DraftAt(cache, seq, length, anchor);
    const std::vector<double> expected =
        testing::ReferenceDraftLogits(drafter_->config(), drafter_->weights(), target_.config(),
                                      target_.weights(), context, anchor);
    // Both are float evaluations of the target's features, the drafter's all the way: within
    // twice the drafter's bound of each other; candidates equal unless a float-noise tie.
    const std::vector<double> bounds =
        testing::DraftLogitBounds(*drafter_, target_, length, KvDtype::kF32);
    const float tie = testing::GreedyTieTolerance(bounds);
    const size_t vocab = bounds.size();
    ASSERT_EQ(got.logits.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_LE(std::abs(got.logits[i] - expected[i]), 2.0 * bounds[i % vocab])
          << "candidate row " << i / vocab << " token " << i % vocab;
    }
    for (size_t j = 0; j < got.tokens.size(); ++j) {
      std::vector<double> row(expected.begin() + j * vocab, expected.begin() + (j + 1) * vocab);
      const auto best = std::max_element(row.begin(), row.end()) - row.begin();
      std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<>());
      if (row[0] - row[1] > tie) {
        EXPECT_EQ(got.tokens[j], best) << "candidate row " << j;
      }
    }
  }
  // The window and the scale each change the reference's drafts (the test above would notice
  // either being ignored).
  drafter_ = testing::RandomDrafter(target_, 6, layered);
  const std::vector<double> windowed = testing::ReferenceDraftLogits(
      layered, drafter_->weights(), target_.config(), target_.weights(), context, anchor);
  DFlashConfig unscaled = layered;
  unscaled.input_embedding_scale = 1.0;
  const std::vector<double> without_scale = testing::ReferenceDraftLogits(
      unscaled, drafter_->weights(), target_.config(), target_.weights(), context, anchor);
  DFlashConfig unwindowed = layered;
  unwindowed.layer_types.clear();
  const std::vector<double> without_window = testing::ReferenceDraftLogits(
      unwindowed, drafter_->weights(), target_.config(), target_.weights(), context, anchor);
  double scale_moves = 0.0, window_moves = 0.0;
  for (size_t i = 0; i < windowed.size(); ++i) {
    scale_moves = std::max(scale_moves, std::abs(windowed[i] - without_scale[i]));
    window_moves = std::max(window_moves, std::abs(windowed[i] - without_window[i]));
  }
  EXPECT_GT(scale_moves, 1e-3);
  EXPECT_GT(window_moves, 1e-3);
}

TEST_F(DFlashDrafterTest, LoadsWhatMakeTinyWritesAndValidatesAgainstTheTarget) {
  const std::string dir = WriteTestDrafter("dscale_drafter_test");
  const DFlashConfig config = testing::TestDrafterConfig(target_.config());
  Result<DFlashDrafter> loaded = DFlashDrafter::Load(dir, target_);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->feature_width(), 2 * 72);
  // A newer drafter's layer layout and embedding scale survive the file round trip.
  const DFlashConfig layered = testing::LayeredTestDrafterConfig(target_.config());
  ASSERT_TRUE(WriteRandomDFlashCheckpoint(dir, layered, 72, 4, DType::kBF16).ok());
  Result<DFlashDrafter> loaded_layered = DFlashDrafter::Load(dir, target_);
  ASSERT_TRUE(loaded_layered.ok()) << loaded_layered.status().message();
  for (int64_t layer = 0; layer < 3; ++layer) {
    EXPECT_EQ(loaded_layered->config().LayerAttention(layer), layered.LayerAttention(layer));
  }
  EXPECT_EQ(loaded_layered->config().input_embedding_scale, 0.375);

  // A drafter whose fc expects three target layers but the config lists two.
  DFlashConfig wider = config;
  wider.target_layer_ids = {0, 1, 2};
  ASSERT_TRUE(WriteRandomDFlashCheckpoint(dir, wider, 72, 4, DType::kBF16).ok());
  std::string text = DFlashConfigToJson(config);
  { std::ofstream(dir + "/config.json") << text; }
  const Result<DFlashDrafter> bad = DFlashDrafter::Load(dir, target_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fc.weight"), std::string::npos) << bad.status().message();
  std::filesystem::remove_all(dir);
}

// --drafter-weights int8 | int4: the drafter's projections quantised at load as a target's are
// (its fc and a draft vocabulary's LM head rows to int8 in either mode); the drafts stay close to
// those of the weights as stored.
TEST_F(DFlashDrafterTest, QuantisedDrafterWeightsDraftCloseToTheStoredOnes) {
  const std::string dir = WriteTestDrafter("dscale_drafter_weights_test");
  DraftVocab subset{.target_vocab_size = target_.config().vocab_size};
  for (int32_t id = 0; id < subset.target_vocab_size; id += 2) subset.token_ids.push_back(id);
  ASSERT_TRUE(SaveDraftVocab(dir + "/" + kDraftVocabFileName, subset).ok());

  const std::vector<int32_t> tokens = RandomTokens(12, 129, 5);
  const auto draft = [&](WeightsMode mode, std::optional<DFlashDrafter>* kept) {
    Result<DFlashDrafter> loaded =
        DFlashDrafter::Load(dir, target_, DrafterHead::kNone, DraftVocabChoice::kSubset, mode);
    EXPECT_TRUE(loaded.ok()) << loaded.status().message();
    kept->emplace(std::move(*loaded));
    DFlashDrafter& drafter = **kept;
    PagedKvCache cache(target_.KvShape(5, 16).WithDtype(KvDtype::kF32));
    drafter.Bind(cache);
    const int32_t seq = cache.AddSequence();
    EXPECT_TRUE(cache.Reserve(seq, 12 + kBlock).ok());
    StepBatch batch;
    AddRequestRows(batch, seq, 0, tokens, cache, false);
    batch.tile_rows = 128;
    batch.capture_layers = drafter.feature_layers();
    ForwardOutput out;
    EXPECT_TRUE(target_.Forward(batch, cache, &out).ok());
    drafter.AppendContext(
        {.features = out.features, .positions = batch.positions(), .slots = batch.kv_slots()});
    DraftOutput drafts;
    const DraftRequest request{.seq = seq, .ctx_len = 12, .anchor = 7};
    EXPECT_TRUE(drafter.Draft(std::span(&request, 1), cache, 16, &drafts).ok());
    return drafts;
  };
  const auto formats = [](const WeightMatrix& w) {
    std::set<WeightFormat> seen;
    for (const WeightMatrix::Block& b : w.blocks()) seen.insert(b.format);
    return seen;
  };
  using Formats = std::set<WeightFormat>;
  std::optional<DFlashDrafter> stored, int8, int4;
  const DraftOutput reference = draft(WeightsMode::kAsStored, &stored);
  EXPECT_EQ(formats(stored->lm_head()), Formats{WeightFormat::kF32});  // the target's, as stored
  for (const auto& [mode, drafter] :
       {std::pair{WeightsMode::kInt8, &int8}, std::pair{WeightsMode::kInt4, &int4}}) {
    const DraftOutput quantised = draft(mode, drafter);
    const WeightFormat layers =
        mode == WeightsMode::kInt8 ? WeightFormat::kInt8 : WeightFormat::kInt4;
    const DFlashWeights& w = (*drafter)->weights();
    EXPECT_EQ(formats(w.fc), Formats{WeightFormat::kInt8});
    EXPECT_EQ(formats((*drafter)->lm_head()), Formats{WeightFormat::kInt8});
    for (const DecoderLayerWeights& layer : w.layers) {
      for (const WeightMatrix* m : {&layer.qkv, &layer.o_proj, &layer.gate_up, &layer.down}) {
        EXPECT_EQ(formats(*m), Formats{layers}) << WeightsModeName(mode);
      }
    }
    ASSERT_EQ(quantised.logits.size(), reference.logits.size());
    float largest = 0, moved = 0;
    for (size_t i = 0; i < reference.logits.size(); ++i) {
      largest = std::max(largest, std::abs(reference.logits[i]));
      moved = std::max(moved, std::abs(quantised.logits[i] - reference.logits[i]));
    }
    EXPECT_GT(moved, 0.0f) << WeightsModeName(mode) << ": the weights were quantised";
    EXPECT_LT(moved, (mode == WeightsMode::kInt8 ? 0.05f : 0.25f) * largest)
        << WeightsModeName(mode);
  }
  std::filesystem::remove_all(dir);
}

// Over the whole vocabulary a quantised drafter scores with an int8 copy of the target's LM head
// (here f32) where UsesInt8DraftHead, else with the target's; the target keeps its own.
TEST_F(DFlashDrafterTest, QuantisedDrafterScoresTheWholeVocabularyWithAnInt8Head) {
  const std::string dir = WriteTestDrafter("dscale_drafter_int8_head_test");
  target_.set_activations({.int8 = cpu::Int8Activations::kInt8});  // `--int8-activations`' default
  Result<DFlashDrafter> loaded = DFlashDrafter::Load(dir, target_, DrafterHead::kNone,
                                                     DraftVocabChoice::kFull, WeightsMode::kInt8);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const WeightMatrix& head = loaded->lm_head();
  ASSERT_EQ(head.rows(), target_.config().vocab_size);
  if (!UsesInt8DraftHead(target_.activations().int8)) {
    EXPECT_EQ(&head, &target_.weights().LmHead());
    std::filesystem::remove_all(dir);
    return;
  }
  for (const WeightMatrix::Block& b : head.blocks()) EXPECT_EQ(b.format, WeightFormat::kInt8);
  for (const WeightMatrix::Block& b : target_.weights().LmHead().blocks()) {
    EXPECT_EQ(b.format, WeightFormat::kF32);
  }
  // Its rows are the target's quantised: within half a step of each group's scale.
  std::vector<float> want(static_cast<size_t>(head.cols())), got(want.size());
  for (const int64_t row : {int64_t{0}, head.rows() / 2, head.rows() - 1}) {
    target_.weights().LmHead().RowToF32(row, want.data());
    head.RowToF32(row, got.data());
    float largest = 0;
    for (const float v : want) largest = std::max(largest, std::abs(v));
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_LE(std::abs(got[i] - want[i]), largest / 127.0f) << "row " << row << " input " << i;
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dscale
