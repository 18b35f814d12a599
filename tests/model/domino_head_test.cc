// The Domino head: its batched rollout against a plain double-precision rollout of one request
// at a time (odd sizes, f32 and BF16 weights), its place in the DFlash drafter, and the errors
// a bad head configuration or file gets.

#include "model/domino_head.h"

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
#include "support/tiny_models.h"

namespace dscale {
namespace {

using testing::OddHeadConfig;
using testing::OddTinyConfig;
using testing::RandomHeadWeights;

// y = W · x in double; W [rows, cols] row-major.
std::vector<double> MatVec(const std::vector<float>& w, int64_t rows, int64_t cols,
                           const std::vector<double>& x) {
  std::vector<double> y(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) y[r] += double{w[r * cols + c]} * x[c];
  }
  return y;
}

// The rollout of one request, written from the definition in domino_head.h, in double. The GRU
// reads `proposals` (the head's own, so that a near-tie decided differently by float rounding
// does not change what later positions see). Returns the corrected logits [width, vocab] and,
// per logit, Σ|W_out·m| (the scale its rounding error is bounded by).
struct ReferenceRow {
  std::vector<double> logits, mass;
};
std::vector<ReferenceRow> ReferenceRollout(const DominoHead& head, const WeightMatrix& embedding,
                                           int32_t anchor, std::span<const int32_t> proposals,
                                           std::span<const float> hidden,
                                           std::span<const float> base_logits) {
  const DominoHeadWeights& w = head.weights();
  const int64_t g = head.config().gru_hidden_size, b = head.config().bottleneck_size;
  const int64_t h = embedding.cols(), vocab = embedding.rows();
  const auto width = static_cast<int64_t>(proposals.size());
  const std::vector<float> w_ih = w.gru_input.ToF32(), w_hh = w.gru_state.ToF32();
  const std::vector<float> w_in = w.correction_in.ToF32(), w_out = w.correction_out.ToF32();
  std::vector<double> state(g, 0.0);
  const auto advance = [&](int32_t token) {
    std::vector<float> row(h);
    embedding.RowToF32(token, row.data());
    const std::vector<double> x(row.begin(), row.end());
    const std::vector<double> gx = MatVec(w_ih, 3 * g, h, x), gh = MatVec(w_hh, 3 * g, g, state);
    for (int64_t i = 0; i < g; ++i) {
      const double r = 1.0 / (1.0 + std::exp(-(gx[i] + gh[i])));
      const double z = 1.0 / (1.0 + std::exp(-(gx[g + i] + gh[g + i])));
      const double n = std::tanh(gx[2 * g + i] + r * gh[2 * g + i]);
      state[i] = (1.0 - z) * n + z * state[i];
    }
  };
  std::vector<ReferenceRow> rows(width);
  rows[0].logits.assign(base_logits.begin(), base_logits.begin() + vocab);
  rows[0].mass.assign(vocab, 0.0);
  advance(anchor);
  for (int64_t col = 1; col < width; ++col) {
    advance(proposals[col - 1]);
    std::vector<double> in(hidden.begin() + col * h, hidden.begin() + (col + 1) * h);
    in.insert(in.end(), state.begin(), state.end());
    std::vector<double> mid = MatVec(w_in, b, h + g, in);
    for (double& m : mid) m = m / (1.0 + std::exp(-m));
    ReferenceRow& row = rows[col];
    row.logits.assign(base_logits.begin() + col * vocab, base_logits.begin() + (col + 1) * vocab);
    row.mass.assign(vocab, 0.0);
    for (int64_t v = 0; v < vocab; ++v) {
      for (int64_t j = 0; j < b; ++j) {
        const double term = double{w_out[v * b + j]} * mid[j];
        row.logits[v] += term;
        row.mass[v] += std::fabs(term);
      }
    }
  }
  return rows;
}

// The float rollout runs 15 GRU steps and two products per correction in f32: 1e-4 of the
// correction's magnitude is far above that rounding (~1e-6) and far below what a wrong gate
// order, a wrong state or a wrong column makes (O(1)).
constexpr double kRelTol = 1e-4;
constexpr double kAbsTol = 1e-5;

void ExpectMatchesReference(const DominoHead& head, const WeightMatrix& embedding,
                            std::span<const int32_t> anchors, int32_t width,
                            std::span<const float> hidden, std::span<const float> base,
                            std::span<const float> corrected, std::span<const int32_t> tokens) {
  const int64_t h = embedding.cols(), vocab = embedding.rows();
  int decided = 0;
  for (size_t r = 0; r < anchors.size(); ++r) {
    const std::vector<ReferenceRow> want = ReferenceRollout(
        head, embedding, anchors[r], tokens.subspan(r * width, width),
        hidden.subspan(r * width * h, width * h), base.subspan(r * width * vocab, width * vocab));
    for (int32_t col = 0; col < width; ++col) {
      const ReferenceRow& row = want[col];
      const float* got = corrected.data() + (r * width + col) * vocab;
      double best = -INFINITY, second = -INFINITY, worst_tol = 0.0;
      for (int64_t v = 0; v < vocab; ++v) {
        const double tol = kRelTol * row.mass[v] + kAbsTol;
        ASSERT_LE(std::fabs(got[v] - row.logits[v]), tol)
            << "request " << r << " column " << col << " logit " << v;
        worst_tol = std::max(worst_tol, tol);
        if (row.logits[v] > best) {
          second = best;
          best = row.logits[v];
        } else {
          second = std::max(second, row.logits[v]);
        }
      }
      // The proposal is the reference's argmax wherever rounding cannot decide it.
      if (best - second > 2 * worst_tol) {
        const int32_t token = tokens[r * width + col];
        EXPECT_EQ(row.logits[token], best) << "request " << r << " column " << col;
        ++decided;
      }
    }
  }
  EXPECT_GT(decided, 0);
}

class DominoHeadTest : public ::testing::TestWithParam<DType> {
 protected:
  DominoHeadTest()
      : target_(OddTinyConfig(), RandomDecoderWeights(OddTinyConfig(), 3, DType::kF32)) {}
  DecoderModel target_;
};

std::string DTypeCase(const ::testing::TestParamInfo<DType>& info) {
  return std::string(DTypeName(info.param));
}

TEST_P(DominoHeadTest, BatchedRolloutMatchesThePlainReferenceAtOddSizes) {
  const DecoderConfig& t = target_.config();
  DominoHead head(OddHeadConfig(), RandomHeadWeights(OddHeadConfig(), t, 7, GetParam()),
                  target_.weights().embed);
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(t.vocab_size - 1));
  for (const int32_t requests : {1, 3, 7}) {
    for (const int32_t width : {1, 4, 15}) {
      SCOPED_TRACE(::testing::Message() << "requests=" << requests << " width=" << width);
      std::vector<int32_t> anchors(requests);
      for (int32_t& a : anchors) a = token(rng);
      std::vector<float> hidden(requests * width * t.hidden_size);
      std::vector<float> base(requests * width * t.vocab_size);
      for (float& v : hidden) v = normal(rng);
      for (float& v : base) v = 2.0f * normal(rng);
      std::vector<float> logits = base;
      std::vector<int32_t> tokens(requests * width);
      head.Refine(anchors, width, hidden, logits, tokens);
      ExpectMatchesReference(head, target_.weights().embed, anchors, width, hidden, base, logits,
                             tokens);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WeightDtypes, DominoHeadTest, ::testing::Values(DType::kF32, DType::kBF16),
                         DTypeCase);

TEST(DominoHeadRefineTest, ZeroCorrectionLeavesTheBackbonesDrafts) {
  const DecoderConfig t = OddTinyConfig();
  DecoderModel target(t, RandomDecoderWeights(t, 3, DType::kF32));
  DominoHeadWeights weights = RandomHeadWeights(OddHeadConfig(), t, 7, DType::kF32);
  weights.correction_out = WeightMatrix::FromF32(
      std::vector<float>(t.vocab_size * OddHeadConfig().bottleneck_size, 0.0f), t.vocab_size,
      OddHeadConfig().bottleneck_size);
  DominoHead head(OddHeadConfig(), std::move(weights), target.weights().embed);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int32_t requests = 3, width = 15;
  std::vector<float> hidden(requests * width * t.hidden_size),
      base(requests * width * t.vocab_size);
  for (float& v : hidden) v = normal(rng);
  for (float& v : base) v = normal(rng);
  std::vector<float> logits = base;
  std::vector<int32_t> tokens(requests * width, -1);
  const std::vector<int32_t> anchors = {0, 5, 130};
  head.Refine(anchors, width, hidden, logits, tokens);
  EXPECT_EQ(logits, base);
  for (int32_t row = 0; row < requests * width; ++row) {
    const auto begin = base.begin() + row * t.vocab_size;
    EXPECT_EQ(tokens[row], std::max_element(begin, begin + t.vocab_size) - begin);
  }
}

TEST(DrafterHeadTest, ParsesTheFlagValues) {
  EXPECT_EQ(ParseDrafterHead("none").value(), DrafterHead::kNone);
  EXPECT_EQ(ParseDrafterHead("domino").value(), DrafterHead::kDomino);
  const Result<DrafterHead> bad = ParseDrafterHead("medusa");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--drafter-head"), std::string::npos);
}

// A drafter folder with a random backbone, written once per test.
class DominoDrafterFolderTest : public ::testing::Test {
 protected:
  DominoDrafterFolderTest()
      : target_(OddTinyConfig(), RandomDecoderWeights(OddTinyConfig(), 3, DType::kF32)),
        dir_((std::filesystem::temp_directory_path() /
              ("dscale_domino_test_" + std::to_string(::getpid())))
                 .string()) {
    config_ = testing::TestDrafterConfig(target_.config());
    config_.domino = OddHeadConfig();
    EXPECT_TRUE(WriteRandomDFlashCheckpoint(dir_, config_, 72, 4, DType::kBF16).ok());
  }
  ~DominoDrafterFolderTest() override { std::filesystem::remove_all(dir_); }

  void WriteConfig(const std::string& text) { std::ofstream(dir_ + "/config.json") << text; }
  Status WriteHead(const DominoHeadConfig& shape) {
    return WriteRandomDominoHead(dir_,
                                 {.head_file = OddHeadConfig().head_file,
                                  .gru_hidden_size = shape.gru_hidden_size,
                                  .bottleneck_size = shape.bottleneck_size},
                                 72, 131, 9, DType::kBF16);
  }
  std::string LoadError(DrafterHead head = DrafterHead::kDomino) {
    const Result<DFlashDrafter> loaded = DFlashDrafter::Load(dir_, target_, head);
    EXPECT_FALSE(loaded.ok());
    return loaded.ok() ? "" : loaded.status().message();
  }

  DecoderModel target_;
  std::string dir_;
  DFlashConfig config_;
};

TEST_F(DominoDrafterFolderTest, LoadsTheDeclaredHeadOnlyWhenAskedTo) {
  ASSERT_TRUE(WriteHead(OddHeadConfig()).ok());
  Result<DFlashDrafter> with = DFlashDrafter::Load(dir_, target_, DrafterHead::kDomino);
  ASSERT_TRUE(with.ok()) << with.status().message();
  ASSERT_NE(with->head(), nullptr);
  EXPECT_EQ(with->head()->config().gru_hidden_size, 23);
  Result<DFlashDrafter> without = DFlashDrafter::Load(dir_, target_, DrafterHead::kNone);
  ASSERT_TRUE(without.ok()) << without.status().message();
  EXPECT_EQ(without->head(), nullptr);
}

// With the head, the backbone's hidden rows and its first proposal are unchanged, and every
// later position is the reference rollout over the backbone's logits.
TEST_F(DominoDrafterFolderTest, DraftsAreTheBackbonesCorrectedByTheHead) {
  ASSERT_TRUE(WriteHead(OddHeadConfig()).ok());
  DFlashDrafter plain = DFlashDrafter::Load(dir_, target_, DrafterHead::kNone).value();
  DFlashDrafter domino = DFlashDrafter::Load(dir_, target_, DrafterHead::kDomino).value();
  const int32_t requests = 3, ctx = 9, block = config_.block_size, width = block - 1;
  PagedKvCache cache(target_.KvShape(8, 32).WithDtype(KvDtype::kF32));
  plain.Bind(cache);
  domino.Bind(cache);
  std::vector<DraftRequest> drafts;
  for (int32_t r = 0; r < requests; ++r) {
    const int32_t seq = cache.AddSequence();
    ASSERT_TRUE(cache.Reserve(seq, ctx + block).ok());
    const std::vector<int32_t> tokens = testing::RandomTokens(ctx, 129, 40 + r);
    StepBatch batch;
    AddRequestRows(batch, seq, 0, tokens, cache, false);
    ForwardOutput out;
    batch.capture_layers = plain.feature_layers();
    ASSERT_TRUE(target_.Forward(batch, cache, &out).ok());
    const ContextRows rows{
        .features = out.features, .positions = batch.positions(), .slots = batch.kv_slots()};
    plain.AppendContext(rows);
    domino.AppendContext(rows);
    drafts.push_back({.seq = seq, .ctx_len = ctx, .anchor = 3 + 50 * r});
  }
  DraftOutput base, corrected;
  ASSERT_TRUE(plain.Draft(drafts, cache, 16, &base).ok());
  ASSERT_TRUE(domino.Draft(drafts, cache, 16, &corrected).ok());
  EXPECT_EQ(corrected.hidden, base.hidden);
  const int64_t vocab = target_.config().vocab_size;
  std::vector<int32_t> anchors;
  for (int32_t r = 0; r < requests; ++r) {
    anchors.push_back(drafts[r].anchor);
    EXPECT_EQ(corrected.tokens[r * width], base.tokens[r * width]) << "request " << r;
    EXPECT_TRUE(std::equal(base.logits.begin() + r * width * vocab,
                           base.logits.begin() + (r * width + 1) * vocab,
                           corrected.logits.begin() + r * width * vocab));
  }
  ExpectMatchesReference(*domino.head(), target_.weights().embed, anchors, width, base.hidden,
                         base.logits, corrected.logits, corrected.tokens);
}

TEST_F(DominoDrafterFolderTest, AHeadFileOfTheWrongShapeIsRefusedNamingFileTensorAndShape) {
  ASSERT_TRUE(WriteHead({.gru_hidden_size = 24, .bottleneck_size = 13}).ok());
  const std::string message = LoadError();
  EXPECT_NE(message.find("gru.weight_ih_l0"), std::string::npos) << message;
  EXPECT_NE(message.find(dir_ + "/domino_head.safetensors"), std::string::npos) << message;
  EXPECT_NE(message.find("expected shape [69, 72]"), std::string::npos) << message;

  ASSERT_TRUE(WriteHead({.gru_hidden_size = 23, .bottleneck_size = 12}).ok());
  const std::string narrow = LoadError();
  EXPECT_NE(narrow.find("correction.proj_in.weight"), std::string::npos) << narrow;
  EXPECT_NE(narrow.find("expected shape [13, 95]"), std::string::npos) << narrow;
}

TEST_F(DominoDrafterFolderTest, AMissingHeadFileIsNamed) {
  const std::string message = LoadError();
  EXPECT_NE(message.find(dir_ + "/domino_head.safetensors"), std::string::npos) << message;
}

TEST_F(DominoDrafterFolderTest, AskingForAHeadTheConfigDoesNotDeclareIsRefused) {
  DFlashConfig plain = config_;
  plain.domino.reset();
  WriteConfig(DFlashConfigToJson(plain));
  const std::string message = LoadError();
  EXPECT_NE(message.find(dir_ + "/config.json"), std::string::npos) << message;
  EXPECT_NE(message.find("domino_config"), std::string::npos) << message;
  EXPECT_TRUE(DFlashDrafter::Load(dir_, target_, DrafterHead::kNone).ok());
}

TEST_F(DominoDrafterFolderTest, BadHeadConfigFieldsAreNamed) {
  ASSERT_TRUE(WriteHead(OddHeadConfig()).ok());
  const auto config_with = [&](const nlohmann::json& section) {
    nlohmann::json j = nlohmann::json::parse(DFlashConfigToJson(config_));
    j["domino_config"] = section;
    return j.dump();
  };
  const struct {
    nlohmann::json section;
    std::string field;
  } cases[] = {
      {{{"head_file", "domino_head.safetensors"},
        {"gru_hidden_size", "23"},
        {"bottleneck_size", 13}},
       "domino_config.gru_hidden_size"},
      {{{"head_file", "domino_head.safetensors"}, {"gru_hidden_size", 23}},
       "domino_config.bottleneck_size"},
      {{{"head_file", "../elsewhere.safetensors"},
        {"gru_hidden_size", 23},
        {"bottleneck_size", 13}},
       "domino_config.head_file"},
      {{{"gru_hidden_size", 23}, {"bottleneck_size", 13}}, "domino_config.head_file"},
      {nlohmann::json::array(), "domino_config"},
  };
  for (const auto& c : cases) {
    WriteConfig(config_with(c.section));
    // The config is refused whatever the flag says: a drafter folder must be well formed.
    const std::string message = LoadError(DrafterHead::kNone);
    EXPECT_NE(message.find("\"" + c.field + "\""), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace dscale
