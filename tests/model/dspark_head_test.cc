// DSpark's heads (model/dspark_head.h): the walk of each Markov head type and of the confidence
// head on tiny cases worked out by hand, a request's walk unchanged by the requests beside it,
// and the DSpark drafter built on them: its block rule (B rows, all predicting; W = B + 1), the
// backbone rows it shares with a DFlash pass, and what it refuses at load.

#include "model/dspark_head.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "model/dflash_drafter.h"
#include "model/random_checkpoint.h"
#include "spec/draft_distribution.h"
#include "spec/position_uniform.h"
#include "support/tiny_models.h"

namespace dscale {
namespace {

// A head over vocab 4, hidden 2, rank 1, with the tensors `values` names (f32).
DSparkHead TinyHead(const DSparkHeadConfig& config,
                    const std::map<std::string, std::vector<float>>& values) {
  const TensorReader read = FromF32Reader(
      [&](const std::string& name, const std::vector<int64_t>&) -> Result<std::vector<float>> {
        return values.at(name);
      });
  return DSparkHead(config, LoadDSparkHeadWeights(config, 2, 4, read).value(), 2, 4);
}

// W1 = [1, 0, −1, 2]ᵀ, W2 = [0, 1, 2, −1]ᵀ: the vanilla bias after token t is W2 · W1[t], i.e.
// [0, 1, 2, −1] after 0, 0 after 1, [0, −1, −2, 1] after 2, [0, 2, 4, −2] after 3.
std::map<std::string, std::vector<float>> MarkovTensors() {
  return {{"markov_head.markov_w1.weight", {1, 0, -1, 2}},
          {"markov_head.markov_w2.weight", {0, 1, 2, -1}}};
}

struct Walked {
  std::vector<float> logits, confidence;
  std::vector<int32_t> tokens;

  std::span<const float> logits_row(int j) const { return std::span(logits).subspan(j * 4, 4); }
};

Walked Walk(DSparkHead& head, const std::vector<int32_t>& anchors, int32_t rows,
            const std::vector<float>& hidden, const std::vector<float>& base,
            const std::vector<DraftChoice>& choices = {}) {
  Walked w{
      .logits = base,
      .confidence = std::vector<float>(head.config().confidence_head ? anchors.size() * rows : 0),
      .tokens = std::vector<int32_t>(anchors.size() * rows, -1)};
  head.Walk(anchors, rows, hidden, w.logits, w.tokens, w.confidence, choices);
  return w;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "entry " << i;
}

// Anchor 0: row 0 gets [0, 1, 2, −1] and proposes 2 (the backbone's argmax was 0); row 1 then
// gets [0, −1, −2, 1] and proposes 3; row 2 gets [0, 2, 4, −2] and proposes 2 (backbone: 0).
TEST(DSparkHeadTest, VanillaWalkFeedsEachProposalToTheNextRow) {
  DSparkHead head = TinyHead({.markov_rank = 1}, MarkovTensors());
  const std::vector<float> base = {0.5f, 0, 0, 0, /**/ 0, 0, 0, 0.5f, /**/ 3, 0, 0, 0};
  const Walked w = Walk(head, {0}, 3, std::vector<float>(6, 0.0f), base);
  EXPECT_EQ(w.tokens, (std::vector<int32_t>{2, 3, 2}));
  ExpectNear(w.logits, {0.5, 1, 2, -1, /**/ 0, -1, -2, 1.5, /**/ 3, 2, 4, -2});
}

// Under --draft-sampling distribution each row's token is drawn from softmax(row / T) with the
// draft stream's uniform at its position, and the next row's bias follows the token drawn (as
// DeepSpec's sample_block_tokens): the walk above redone by hand with the draws.
TEST(DSparkHeadTest, SampledWalkFeedsEachDrawToTheNextRow) {
  DSparkHead head = TinyHead({.markov_rank = 1}, MarkovTensors());
  const std::vector<float> base = {0.5f, 0, 0, 0, /**/ 0, 0, 0, 0.5f, /**/ 3, 0, 0, 0};
  const std::vector<std::vector<double>> bias_after = {
      {0, 1, 2, -1}, {0, 0, 0, 0}, {0, -1, -2, 1}, {0, 2, 4, -2}};
  int not_argmax = 0;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    const DraftChoice choice{.temperature = 1.2f, .seed = seed, .first_position = 40};
    const Walked w = Walk(head, {0}, 3, std::vector<float>(6, 0.0f), base, {choice});
    int32_t prev = 0;
    std::vector<double> scratch;
    for (int j = 0; j < 3; ++j) {
      std::vector<float> row(4);
      for (int v = 0; v < 4; ++v) row[v] = base[j * 4 + v] + static_cast<float>(bias_after[prev][v]);
      for (int v = 0; v < 4; ++v) EXPECT_NEAR(w.logits[j * 4 + v], row[v], 1e-6) << "row " << j;
      const int32_t drawn = SampleDraftColumn(
          w.logits_row(j), 1.2f, StreamUniform(seed, 40 + j, UniformStream::kDraft), &scratch);
      ASSERT_EQ(w.tokens[j], drawn) << "row " << j << " seed " << seed;
      not_argmax += drawn != std::max_element(row.begin(), row.end()) - row.begin();
      prev = drawn;
    }
  }
  EXPECT_GT(not_argmax, 0);
}

// The gate reads [h ; W1[prev]], hidden first: a weight of ln 3 on h's first entry (1 in row 0,
// 0 in row 1) makes the gate σ(ln 3) = 3/4, then σ(0) = 1/2.
TEST(DSparkHeadTest, GatedWalkScalesTheEmbeddingByTheGateOfHiddenAndEmbedding) {
  std::map<std::string, std::vector<float>> t = MarkovTensors();
  t["markov_head.gate_proj.weight"] = {static_cast<float>(std::log(3.0)), 0, 0};
  t["markov_head.gate_proj.bias"] = {0};
  DSparkHead head = TinyHead({.markov_rank = 1, .markov_head_type = MarkovHeadType::kGated}, t);
  const std::vector<float> hidden = {1, 0, /**/ 0, 5};
  const std::vector<float> base = {0, 0, 1.6f, 0, /**/ 0, 0, 0, 0};
  const Walked w = Walk(head, {0}, 2, hidden, base);
  // Row 0: 0.75 · [0, 1, 2, −1] → argmax 2. Row 1 after 2: 0.5 · [0, −1, −2, 1] → argmax 3.
  ExpectNear(w.logits, {0, 0.75, 3.1, -0.75, /**/ 0, -0.5, -1, 0.5});
  EXPECT_EQ(w.tokens, (std::vector<int32_t>{2, 3}));
}

// joint_proj over [s ; W1[prev] ; h]: gate row 0 (σ = 1/2), candidate row tanh(W1[prev]),
// output row tanh(2 s + h₀/2). So x₀ = tanh(h₀/2) (s = 0), s₁ = tanh(W1[anchor]) / 2, and
// x₁ = tanh(2 s₁ + h₀/2). Two requests in one walk: each starts from s = 0.
TEST(DSparkHeadTest, RnnWalkCarriesItsStateWithinABlockOnly) {
  std::map<std::string, std::vector<float>> t = MarkovTensors();
  t["markov_head.joint_proj.weight"] = {0, 0, 0, 0, /**/ 0, 1, 0, 0, /**/ 2, 0, 0.5f, 0};
  t["markov_head.joint_proj.bias"] = {0, 0, 0};
  DSparkHead head = TinyHead({.markov_rank = 1, .markov_head_type = MarkovHeadType::kRnn}, t);
  const std::vector<float> hidden = {1, 0, /**/ 0, 0, /**/ 1, 0, /**/ 0, 0};
  const Walked w = Walk(head, {3, 3}, 2, hidden, std::vector<float>(16, 0.0f));
  const double x0 = std::tanh(0.5), s1 = std::tanh(2.0) / 2, x1 = std::tanh(2 * s1);
  // Row 0 after anchor 3: x₀ · [0, 1, 2, −1] → argmax 2; row 1 (prev 2): x₁ · the same W2.
  const std::vector<double> request = {0, x0, 2 * x0, -x0, /**/ 0, x1, 2 * x1, -x1};
  std::vector<double> both = request;
  both.insert(both.end(), request.begin(), request.end());
  ExpectNear(w.logits, both);
  EXPECT_EQ(w.tokens, (std::vector<int32_t>{2, 2, 2, 2}));
}

// proj · h + b, or proj · [h ; W1[prev]] + b with the Markov input: the previous token of row j
// is the anchor, then the row before's proposal.
TEST(DSparkHeadTest, ConfidenceReadsTheRowAndThePreviousTokensEmbedding) {
  const std::vector<float> hidden = {1, 0, /**/ 0, 1, /**/ 2, 2};
  const std::vector<float> base = {0.5f, 0, 0, 0, /**/ 0, 0, 0, 0.5f, /**/ 3, 0, 0, 0};
  std::map<std::string, std::vector<float>> t = MarkovTensors();
  t["confidence_head.proj.weight"] = {1, -1};
  t["confidence_head.proj.bias"] = {0.5f};
  DSparkHead plain = TinyHead({.markov_rank = 0, .confidence_head = true}, t);
  Walked w = Walk(plain, {0}, 3, hidden, base);
  ExpectNear(w.confidence, {1.5, -0.5, 0.5});
  EXPECT_EQ(w.tokens, (std::vector<int32_t>{0, 3, 0}));  // no Markov head: the backbone's
  EXPECT_EQ(w.logits, base);

  t["confidence_head.proj.weight"] = {1, -1, 3};
  t["confidence_head.proj.bias"] = {0};
  DSparkHead markov =
      TinyHead({.markov_rank = 1, .confidence_head = true, .confidence_with_markov = true}, t);
  w = Walk(markov, {0}, 3, hidden, base);
  EXPECT_EQ(w.tokens, (std::vector<int32_t>{2, 3, 2}));  // as in the vanilla walk
  // prev = 0, 2, 3: W1 = 1, −1, 2.
  ExpectNear(w.confidence, {1 + 3, -1 - 3, 0 + 6});
}

// Each request walks alone: its rows' bits are the same whether it is drafted alone or beside
// others (random BF16 heads of every type at odd sizes).
TEST(DSparkHeadTest, ARequestsWalkDoesNotDependOnTheOthers) {
  const int64_t hidden = 37, vocab = 53, rows = 5;
  for (const MarkovHeadType type :
       {MarkovHeadType::kVanilla, MarkovHeadType::kGated, MarkovHeadType::kRnn}) {
    const DSparkHeadConfig config{.markov_rank = 7,
                                  .markov_head_type = type,
                                  .confidence_head = true,
                                  .confidence_with_markov = true};
    std::map<std::string, std::vector<float>> values;
    for (TensorToWrite& t : RandomDSparkHeadTensors(config, hidden, vocab, 3, DType::kBF16)) {
      values[t.name] = std::move(t.values);
    }
    const TensorReader read = FromF32Reader(
        [&](const std::string& name, const std::vector<int64_t>&) -> Result<std::vector<float>> {
          return values.at(name);
        });
    DSparkHead head(config, LoadDSparkHeadWeights(config, hidden, vocab, read).value(), hidden,
                    vocab);
    std::mt19937 rng(9);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const std::vector<int32_t> anchors = {4, 52, 0};
    std::vector<float> h(anchors.size() * rows * hidden), base(anchors.size() * rows * vocab);
    for (float& v : h) v = normal(rng);
    for (float& v : base) v = 3.0f * normal(rng);
    const Walked together = Walk(head, anchors, rows, h, base);
    for (size_t q = 0; q < anchors.size(); ++q) {
      const auto rows_of = [&](const std::vector<float>& x, int64_t width) {
        return std::vector<float>(x.begin() + q * rows * width, x.begin() + (q + 1) * rows * width);
      };
      const Walked alone = Walk(head, {anchors[q]}, rows, rows_of(h, hidden), rows_of(base, vocab));
      EXPECT_EQ(alone.logits, rows_of(together.logits, vocab)) << MarkovHeadTypeName(type) << q;
      EXPECT_EQ(alone.confidence, rows_of(together.confidence, 1));
      EXPECT_EQ(alone.tokens, std::vector<int32_t>(together.tokens.begin() + q * rows,
                                                   together.tokens.begin() + (q + 1) * rows));
    }
  }
}

// Contexts of `requests` random prompts of `ctx` tokens fed to each drafter in `drafters`, bound
// to one cache; returns the draft requests.
std::vector<DraftRequest> FeedContexts(DecoderModel& target, PagedKvCache& cache,
                                       std::initializer_list<DFlashDrafter*> drafters,
                                       int32_t requests, int32_t ctx, int32_t reserve) {
  for (DFlashDrafter* d : drafters) d->Bind(cache);
  std::vector<DraftRequest> out;
  for (int32_t r = 0; r < requests; ++r) {
    const int32_t seq = cache.AddSequence();
    EXPECT_TRUE(cache.Reserve(seq, ctx + reserve).ok());
    const std::vector<int32_t> tokens = testing::RandomTokens(ctx, 129, 60 + r);
    StepBatch batch;
    AddRequestRows(batch, seq, 0, tokens, cache, false);
    ForwardOutput fwd;
    batch.capture_layers = (*drafters.begin())->feature_layers();
    EXPECT_TRUE(target.Forward(batch, cache, &fwd).ok());
    for (DFlashDrafter* d : drafters) {
      d->AppendContext(
          {.features = fwd.features, .positions = batch.positions(), .slots = batch.kv_slots()});
    }
    out.push_back({.seq = seq, .ctx_len = ctx, .anchor = 3 + 41 * r});
  }
  return out;
}

class DSparkDrafterTest : public ::testing::Test {
 protected:
  DSparkDrafterTest()
      : target_(testing::OddTinyConfig(),
                RandomDecoderWeights(testing::OddTinyConfig(), 3, DType::kF32)) {}
  DecoderModel target_;
};

// B = 6 rows, all through the LM head: 6 candidates, W = 7. Without heads (rank 0), a DSpark
// pass's rows 1 .. B−1 are a DFlash pass's over the same B-row block with the same weights, bit
// for bit: the block rule is the one difference.
TEST_F(DSparkDrafterTest, DraftsBRowsAllPredictingAndSharesTheDFlashRows) {
  const DFlashConfig dspark_config = testing::TestDSparkConfig(target_.config(), {}, 6);
  DFlashConfig dflash_config = dspark_config;
  dflash_config.dspark.reset();
  auto dspark = testing::RandomDrafter(target_, 5, dspark_config);
  auto dflash = testing::RandomDrafter(target_, 5, dflash_config);
  EXPECT_EQ(dspark->block_size(), 7);
  EXPECT_EQ(dflash->block_size(), 6);
  PagedKvCache cache(target_.KvShape(8, 32).WithDtype(KvDtype::kF32));
  const std::vector<DraftRequest> requests =
      FeedContexts(target_, cache, {dspark.get(), dflash.get()}, 3, 11, 7);
  DraftOutput a, b;
  ASSERT_TRUE(dspark->Draft(requests, cache, 16, &a).ok());
  ASSERT_TRUE(dflash->Draft(requests, cache, 16, &b).ok());
  ASSERT_EQ(a.candidates, 6);
  ASSERT_EQ(b.candidates, 5);
  EXPECT_TRUE(a.confidence.empty());
  const int64_t vocab = target_.config().vocab_size, h = target_.config().hidden_size;
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t j = 1; j < 6; ++j) {
      const int64_t ra = r * 6 + j, rb = r * 5 + j - 1;
      EXPECT_TRUE(std::equal(a.logits.begin() + ra * vocab, a.logits.begin() + (ra + 1) * vocab,
                             b.logits.begin() + rb * vocab));
      EXPECT_TRUE(std::equal(a.hidden.begin() + ra * h, a.hidden.begin() + (ra + 1) * h,
                             b.hidden.begin() + rb * h));
      EXPECT_EQ(a.tokens[ra], b.tokens[rb]);
    }
  }
}

// With heads, a request's draft is the same bits alone or beside others, and the walk's outputs
// are what DSparkHead::Walk makes of the backbone's rows.
TEST_F(DSparkDrafterTest, HeadsRunPerRequestOnTheBackbonesRows) {
  for (const MarkovHeadType type :
       {MarkovHeadType::kVanilla, MarkovHeadType::kGated, MarkovHeadType::kRnn}) {
    SCOPED_TRACE(MarkovHeadTypeName(type));
    const DSparkHeadConfig heads{.markov_rank = 5,
                                 .markov_head_type = type,
                                 .confidence_head = true,
                                 .confidence_with_markov = type != MarkovHeadType::kGated};
    auto drafter =
        testing::RandomDrafter(target_, 7, testing::TestDSparkConfig(target_.config(), heads, 7));
    DFlashConfig bare_config = testing::TestDSparkConfig(target_.config(), {}, 7);
    auto bare = testing::RandomDrafter(target_, 7, bare_config);  // the same backbone
    PagedKvCache cache(target_.KvShape(8, 32).WithDtype(KvDtype::kF32));
    const std::vector<DraftRequest> requests =
        FeedContexts(target_, cache, {drafter.get(), bare.get()}, 3, 10, 8);
    DraftOutput all, base;
    ASSERT_TRUE(drafter->Draft(requests, cache, 16, &all).ok());
    ASSERT_TRUE(bare->Draft(requests, cache, 16, &base).ok());
    ASSERT_EQ(all.confidence.size(), 21u);
    EXPECT_EQ(all.hidden, base.hidden);
    DSparkHead head = *drafter->dspark_head();
    std::vector<float> logits = base.logits, confidence(21);
    std::vector<int32_t> tokens(21);
    head.Walk(std::vector<int32_t>{3, 44, 85}, 7, base.hidden, logits, tokens, confidence);
    EXPECT_EQ(all.logits, logits);
    EXPECT_EQ(all.tokens, tokens);
    EXPECT_EQ(all.confidence, confidence);
    const int64_t vocab = target_.config().vocab_size;
    for (size_t r = 0; r < requests.size(); ++r) {
      DraftOutput alone;
      ASSERT_TRUE(drafter->Draft(std::span(&requests[r], 1), cache, 16, &alone).ok());
      EXPECT_TRUE(
          std::equal(alone.logits.begin(), alone.logits.end(), all.logits.begin() + r * 7 * vocab));
      EXPECT_TRUE(std::equal(alone.tokens.begin(), alone.tokens.end(), all.tokens.begin() + r * 7));
      EXPECT_TRUE(std::equal(alone.confidence.begin(), alone.confidence.end(),
                             all.confidence.begin() + r * 7));
    }
  }
}

// A DSpark folder as make-tiny writes it (DeepSpec's layout, with the embedding and LM head
// copies), and what loading it refuses.
class DSparkFolderTest : public DSparkDrafterTest {
 protected:
  DSparkFolderTest()
      : dir_((std::filesystem::temp_directory_path() /
              ("dscale_dspark_test_" + std::to_string(::getpid())))
                 .string()) {
    config_ = testing::TestDSparkConfig(
        target_.config(),
        {.markov_rank = 6, .markov_head_type = MarkovHeadType::kRnn, .confidence_head = true}, 5);
    Write(config_);
  }
  ~DSparkFolderTest() override { std::filesystem::remove_all(dir_); }

  void Write(const DFlashConfig& c) {
    const DecoderConfig& t = target_.config();
    const std::vector<float> table = target_.weights().embed.ToF32();
    EXPECT_TRUE(WriteRandomDSparkCheckpoint(dir_, c, t.hidden_size, 4, DType::kBF16, table,
                                            target_.weights().LmHead().ToF32())
                    .ok());
  }
  std::string LoadError(DrafterHead head, DraftVocabChoice vocab) {
    const Result<DFlashDrafter> loaded = DFlashDrafter::Load(dir_, target_, head, vocab);
    EXPECT_FALSE(loaded.ok());
    return loaded.ok() ? "" : loaded.status().message();
  }

  std::string dir_;
  DFlashConfig config_;
};

TEST_F(DSparkFolderTest, LoadsDeepSpecsLayout) {
  const Result<DFlashDrafter> d =
      DFlashDrafter::Load(dir_, target_, DrafterHead::kNone, DraftVocabChoice::kAuto);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->block_size(), 6);
  ASSERT_NE(d->dspark_head(), nullptr);
  EXPECT_EQ(d->dspark_head()->config(), *config_.dspark);
  EXPECT_EQ(d->draft_vocab(), nullptr);
}

TEST_F(DSparkFolderTest, RefusesADominoHeadAndADraftVocabulary) {
  std::string message = LoadError(DrafterHead::kDomino, DraftVocabChoice::kFull);
  EXPECT_NE(message.find("--drafter-head domino"), std::string::npos) << message;
  EXPECT_NE(message.find("Qwen3DSparkModel"), std::string::npos) << message;
  message = LoadError(DrafterHead::kNone, DraftVocabChoice::kSubset);
  EXPECT_NE(message.find(dir_ + "/draft_vocab.json"), std::string::npos) << message;
  std::vector<int32_t> ids(16);
  for (int32_t i = 0; i < 16; ++i) ids[i] = i;
  ASSERT_TRUE(SaveDraftVocab(dir_ + "/draft_vocab.json",
                             {.target_vocab_size = target_.config().vocab_size, .token_ids = ids})
                  .ok());
  message = LoadError(DrafterHead::kNone, DraftVocabChoice::kAuto);
  EXPECT_NE(message.find("draft_vocab.json: a Qwen3DSparkModel drafter drafts over the whole "
                         "vocabulary"),
            std::string::npos)
      << message;
  EXPECT_TRUE(DFlashDrafter::Load(dir_, target_, DrafterHead::kNone, DraftVocabChoice::kFull).ok());
}

TEST_F(DSparkFolderTest, AHeadTensorOfTheWrongShapeIsNamed) {
  // The config declares rank 7; the file holds rank 6's tensors.
  DFlashConfig declared = config_;
  declared.dspark->markov_rank = 7;
  std::ofstream(dir_ + "/config.json") << DFlashConfigToJson(declared);
  const std::string message = LoadError(DrafterHead::kNone, DraftVocabChoice::kFull);
  EXPECT_NE(message.find("markov_head.markov_w1.weight"), std::string::npos) << message;
  EXPECT_NE(message.find("expected shape [131, 7]"), std::string::npos) << message;
}

}  // namespace
}  // namespace dscale
