// The reduced draft vocabulary: its file's contract and errors, the ranking that makes one,
// WeightMatrix::SelectRows against the source rows in every storage format, and the drafter
// (with and without a Domino head) over a subset against the same drafter over the whole
// vocabulary.

#include "model/draft_vocab.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "float_bounds.h"
#include "kernels/cpu/gemm_int8.h"
#include "model/dflash_drafter.h"
#include "model/random_checkpoint.h"
#include "spec/draft_distribution.h"
#include "spec/position_uniform.h"
#include "support/tiny_models.h"

namespace dscale {
namespace {

constexpr const char* kPath = "dir/draft_vocab.json";

std::string VocabJson(const std::string& ids, int64_t target_vocab = 40,
                      const std::string& format = "\"dscale-draft-vocab\"") {
  return "{\"format\": " + format +
         ", \"version\": 1, \"target_vocab_size\": " + std::to_string(target_vocab) +
         ", \"token_ids\": [" + ids + "]}";
}

std::string Range(int from, int to) {
  std::string ids;
  for (int i = from; i < to; ++i) ids += (ids.empty() ? "" : ", ") + std::to_string(i);
  return ids;
}

void ExpectError(const std::string& text, const std::string& expected) {
  Result<DraftVocab> parsed = ParseDraftVocab(text, kPath, 40);
  ASSERT_FALSE(parsed.ok()) << text;
  EXPECT_NE(parsed.status().message().find(expected), std::string::npos)
      << parsed.status().message();
  EXPECT_NE(parsed.status().message().find(kPath), std::string::npos)
      << "the error names the file: " << parsed.status().message();
}

TEST(DraftVocabFileTest, ParsesSortedIdsWithinTheVocabulary) {
  Result<DraftVocab> parsed = ParseDraftVocab(VocabJson(Range(3, 20) + ", 39"), kPath, 40);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->size(), 18);
  EXPECT_EQ(parsed->token_ids.front(), 3);
  EXPECT_EQ(parsed->token_ids.back(), 39);
  EXPECT_EQ(parsed->target_vocab_size, 40);
}

TEST(DraftVocabFileTest, BadFilesAreRefusedNamingTheFieldAndEntry) {
  ExpectError(VocabJson(Range(0, 16) + ", 40"), "\"token_ids\"[16]: token id 40 is outside");
  ExpectError(VocabJson(Range(0, 16) + ", -1"), "\"token_ids\"[16]");
  ExpectError(VocabJson(Range(1, 17) + ", 0"), "\"token_ids\"[16]: token id 0 after 16");
  ExpectError(VocabJson(Range(0, 16) + ", 15"), "strictly increasing");
  ExpectError(VocabJson(Range(0, 16) + ", 17.5"), "\"token_ids\"[16]");
  ExpectError(VocabJson(Range(0, 16) + ", \"17\""), "\"token_ids\"[16]");
  ExpectError(VocabJson(""), "field \"token_ids\": 0 ids; a draft vocabulary needs at least 16");
  ExpectError(VocabJson(Range(0, 15)), "15 ids");
  ExpectError(VocabJson(Range(0, 16), 41), "\"target_vocab_size\": the subset was made for a 41");
  ExpectError(VocabJson(Range(0, 16), 40, "\"other\""), "field \"format\"");
  ExpectError("{\"format\": \"dscale-draft-vocab\", \"version\": 1, \"target_vocab_size\": 40}",
              "field \"token_ids\": missing");
  ExpectError(
      "{\"format\": \"dscale-draft-vocab\", \"version\": 1, \"target_vocab_size\": 40, "
      "\"token_ids\": {}}",
      "expected an array of token ids");
  ExpectError("[1, 2]", "expected a JSON object");
  ExpectError("{", "not valid JSON");
}

TEST(DraftVocabFileTest, SavesWhatItLoads) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("dscale_draft_vocab_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  EXPECT_FALSE(LoadDraftVocab(dir.string(), 40).value().has_value()) << "no file: no subset";
  DraftVocab vocab{.target_vocab_size = 40, .token_ids = {}};
  for (int32_t id = 1; id < 40; id += 2) vocab.token_ids.push_back(id);
  ASSERT_TRUE(SaveDraftVocab((dir / kDraftVocabFileName).string(), vocab).ok());
  Result<std::optional<DraftVocab>> loaded = LoadDraftVocab(dir.string(), 40);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->token_ids, vocab.token_ids);
  EXPECT_FALSE(LoadDraftVocab(dir.string(), 39).ok()) << "made for another target";
  vocab.token_ids.push_back(3);
  EXPECT_FALSE(SaveDraftVocab((dir / "bad.json").string(), vocab).ok()) << "unsorted";
  std::filesystem::remove_all(dir);
}

TEST(RankDraftVocabTest, RequiredIdsFirstThenHighestCountsWithTiesToTheLowerId) {
  const std::vector<int64_t> counts = {5, 0, 9, 9, 1, 7, 0, 2};
  EXPECT_EQ(RankDraftVocab(counts, 4, std::vector<int32_t>{6}), (std::vector<int32_t>{2, 3, 5, 6}));
  EXPECT_EQ(RankDraftVocab(counts, 5, std::vector<int32_t>{6, 6}),
            (std::vector<int32_t>{0, 2, 3, 5, 6}));
  EXPECT_EQ(RankDraftVocab(counts, 1, std::vector<int32_t>{1, 7}), (std::vector<int32_t>{1, 7}));
  EXPECT_EQ(RankDraftVocab(counts, 100, {}).size(), counts.size());
  // Equal counts: the lower id wins the last place.
  EXPECT_EQ(RankDraftVocab(counts, 7, {}), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 7}));
}

// A [rows, cols] matrix of random values stored as `format`.
WeightMatrix RandomMatrix(WeightFormat format, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> f32(static_cast<size_t>(rows * cols));
  for (float& v : f32) v = value(rng);
  if (format == WeightFormat::kF32) return WeightMatrix::FromF32(f32, rows, cols);
  if (format == WeightFormat::kBF16) {
    std::vector<uint16_t> bits(f32.size());
    ConvertFromF32(DType::kBF16, f32.data(), f32.size(), bits.data());
    return WeightMatrix::FromBf16(std::move(bits), rows, cols);
  }
  std::vector<int8_t> q(f32.size());
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<int8_t>(std::lround(f32[i] * 127));
  std::vector<cpu::Int8Scale> scales(static_cast<size_t>(rows * cpu::Int8Groups(cols)));
  for (cpu::Int8Scale& s : scales) s = cpu::Int8ScaleAtLeast(0.01f + 0.01f * std::fabs(value(rng)));
  return WeightMatrix::FromInt8(std::move(q), std::move(scales), rows, cols);
}

// Selected rows read back as their sources, and a product over them within the float bound of
// two dot-product orders of the source's product (the reference), column for column.
void ExpectSelectionMatchesSource(const WeightMatrix& source, const std::vector<int32_t>& rows) {
  const WeightMatrix selected = source.SelectRows(rows);
  const int64_t cols = source.cols();
  ASSERT_EQ(selected.rows(), static_cast<int64_t>(rows.size()));
  ASSERT_EQ(selected.cols(), cols);
  std::vector<float> got(static_cast<size_t>(cols)), want(static_cast<size_t>(cols));
  for (size_t i = 0; i < rows.size(); ++i) {
    selected.RowToF32(static_cast<int64_t>(i), got.data());
    source.RowToF32(rows[i], want.data());
    ASSERT_EQ(got, want) << "row " << i << " (source row " << rows[i] << ")";
  }
  constexpr int64_t kInputs = 7;
  const std::vector<float> x = [&] {
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<float> v(static_cast<size_t>(kInputs * cols));
    for (float& f : v) f = value(rng);
    return v;
  }();
  std::vector<float> y_selected(static_cast<size_t>(kInputs) * rows.size());
  std::vector<float> y_full(static_cast<size_t>(kInputs * source.rows()));
  Project(x.data(), selected, y_selected.data(), kInputs);
  Project(x.data(), source, y_full.data(), kInputs);
  for (int64_t r = 0; r < kInputs; ++r) {
    for (size_t i = 0; i < rows.size(); ++i) {
      source.RowToF32(rows[i], want.data());
      double mass = 0.0;
      for (int64_t k = 0; k < cols; ++k) mass += std::fabs(double(x[r * cols + k]) * want[k]);
      EXPECT_NEAR(y_selected[r * rows.size() + i], y_full[r * source.rows() + rows[i]],
                  testing::DotProductOrderBound(cols, mass))
          << "input " << r << " row " << rows[i];
    }
  }
}

TEST(SelectRowsTest, CopiesTheRowsInEveryFormatAndProjectsAsTheSource) {
  const std::vector<int32_t> rows = {0, 2, 3, 17, 18, 35, 36};
  for (const WeightFormat format : {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kInt8}) {
    SCOPED_TRACE(static_cast<int>(format));
    ExpectSelectionMatchesSource(RandomMatrix(format, 37, 45, 1), rows);
    ExpectSelectionMatchesSource(RandomMatrix(format, 37, 45, 2), {36});
  }
  // A stacked source whose blocks differ in format: each selected row keeps its block's format.
  const WeightMatrix stacked = WeightMatrix::Stack({RandomMatrix(WeightFormat::kBF16, 11, 45, 3),
                                                    RandomMatrix(WeightFormat::kF32, 13, 45, 4),
                                                    RandomMatrix(WeightFormat::kInt8, 13, 45, 5)});
  ExpectSelectionMatchesSource(stacked, rows);
  ExpectSelectionMatchesSource(stacked, {1, 30, 12, 5});  // any order
  EXPECT_EQ(stacked.SelectRows(rows).bytes(),
            int64_t{3} * 2 * 45 + 2 * 4 * 45 +
                2 * (45 + int64_t{sizeof(cpu::Int8Scale)} * cpu::Int8Groups(45)));
}

class DraftVocabDrafterTest : public ::testing::TestWithParam<bool> {
 protected:
  DraftVocabDrafterTest()
      : target_(testing::OddTinyConfig(),
                RandomDecoderWeights(testing::OddTinyConfig(), 3, DType::kF32)) {}

  std::unique_ptr<DFlashDrafter> MakeDrafter() const {
    return GetParam() ? testing::RandomDominoDrafter(target_, 4)
                      : testing::RandomDrafter(target_, 4);
  }

  // One draft after a prefill of `prompt` on a fresh f32 cache (drawn when `sampling` is set).
  DraftOutput DraftAfter(DFlashDrafter& drafter, const std::vector<int32_t>& prompt,
                         int32_t anchor, const SamplingParams* sampling = nullptr) {
    const auto n = static_cast<int32_t>(prompt.size());
    PagedKvCache cache(target_.KvShape(16, 4).WithDtype(KvDtype::kF32));
    drafter.Bind(cache);
    const int32_t seq = cache.AddSequence();
    EXPECT_TRUE(cache.Reserve(seq, n + drafter.block_size()).ok());
    StepBatch batch;
    AddRequestRows(batch, seq, 0, prompt, cache, /*all_logits=*/false);
    batch.capture_layers = drafter.feature_layers();
    ForwardOutput out;
    EXPECT_TRUE(target_.Forward(batch, cache, &out).ok());
    drafter.AppendContext(
        {.features = out.features, .positions = batch.positions(), .slots = batch.kv_slots()});
    DraftOutput draft;
    const DraftRequest request{
        .seq = seq, .ctx_len = n, .anchor = anchor, .committed = prompt, .sampling = sampling};
    EXPECT_TRUE(drafter.Draft(std::span(&request, 1), cache, 16, &draft).ok());
    return draft;
  }

  DecoderModel target_;
};

// A subset that keeps every full-vocabulary proposal (and drops a third of the other ids) makes
// the same proposals, and its logits are the full logits' columns of its ids: the LM head's (and
// the head's correction's) subset rows, as the full product gives them up to float order.
TEST_P(DraftVocabDrafterTest, SubsetLogitsAreTheFullLogitsColumnsAndProposalsMatch) {
  const std::vector<int32_t> prompt = testing::RandomTokens(11, 129, 5);
  std::unique_ptr<DFlashDrafter> full = MakeDrafter();
  const DraftOutput want = DraftAfter(*full, prompt, 7);
  DraftVocab subset{.target_vocab_size = target_.config().vocab_size, .token_ids = {}};
  for (int32_t id = 0; id < target_.config().vocab_size; ++id) {
    const bool proposed =
        std::find(want.tokens.begin(), want.tokens.end(), id) != want.tokens.end();
    if (proposed || id % 3 != 0) subset.token_ids.push_back(id);
  }
  std::unique_ptr<DFlashDrafter> reduced = MakeDrafter();
  reduced->RestrictVocab(subset);
  ASSERT_EQ(reduced->draft_vocab_size(), subset.size());
  const DraftOutput got = DraftAfter(*reduced, prompt, 7);
  EXPECT_EQ(got.tokens, want.tokens);
  const int64_t v = target_.config().vocab_size, s = subset.size();
  const int64_t h = target_.config().hidden_size;
  ASSERT_EQ(got.logits.size(), static_cast<size_t>(15 * s));
  EXPECT_EQ(got.hidden, want.hidden);
  std::vector<float> row(static_cast<size_t>(h));
  for (int64_t j = 0; j < 15; ++j) {
    for (int64_t i = 0; i < s; ++i) {
      const int32_t id = subset.token_ids[static_cast<size_t>(i)];
      target_.weights().LmHead().RowToF32(id, row.data());
      double mass = 0.0;
      for (int64_t k = 0; k < h; ++k) mass += std::fabs(double(got.hidden[j * h + k]) * row[k]);
      // With a head the correction adds a second product over the same inputs (the GRU state
      // and MLP input are computed identically), whose rows are gathered likewise; its terms
      // are not observable here, so its order bound is taken as 1e-5 of the logit's magnitude
      // (|correction| ≲ |logit| at these random weights, and γ_13 ≈ 8e-7 for B = 13), and the
      // sum's rounding as three more backbone bounds.
      const double bound = (GetParam() ? 4.0 : 1.0) * testing::DotProductOrderBound(h, mass) +
                           (GetParam() ? 1e-5 * (1.0 + std::fabs(want.logits[j * v + id])) : 0.0);
      ASSERT_NEAR(got.logits[j * s + i], want.logits[j * v + id], bound)
          << "position " << j << " token " << id;
    }
  }
}

// A subset that leaves out the full drafter's proposals proposes only ids of the subset, each the
// largest of its row's subset logits.
TEST_P(DraftVocabDrafterTest, ProposalsAreTheSubsetsArgmaxAsTargetIds) {
  const std::vector<int32_t> prompt = testing::RandomTokens(9, 129, 6);
  std::unique_ptr<DFlashDrafter> full = MakeDrafter();
  const DraftOutput unrestricted = DraftAfter(*full, prompt, 3);
  DraftVocab subset{.target_vocab_size = target_.config().vocab_size, .token_ids = {}};
  for (int32_t id = 1; id < target_.config().vocab_size; id += 4) {
    if (std::find(unrestricted.tokens.begin(), unrestricted.tokens.end(), id) ==
        unrestricted.tokens.end()) {
      subset.token_ids.push_back(id);
    }
  }
  std::unique_ptr<DFlashDrafter> reduced = MakeDrafter();
  reduced->RestrictVocab(subset);
  const DraftOutput got = DraftAfter(*reduced, prompt, 3);
  const int64_t s = subset.size();
  for (int64_t j = 0; j < 15; ++j) {
    const auto begin = got.logits.begin() + j * s;
    const auto column = std::max_element(begin, begin + s) - begin;
    EXPECT_EQ(got.tokens[static_cast<size_t>(j)], subset.token_ids[static_cast<size_t>(column)])
        << "position " << j;
  }
}

// --draft-sampling distribution: each candidate is the draw from its own row's softmax(row / T)
// with the draft stream's uniform at its position (mapped to a target id over a subset), the
// first row is the backbone's whatever is drawn, and a head's later rows follow the drawn
// tokens (they differ from the argmax run's once an earlier draw does).
TEST_P(DraftVocabDrafterTest, SampledProposalsAreDrawsFromEachRowsDistribution) {
  const std::vector<int32_t> prompt = testing::RandomTokens(10, 129, 8);
  const auto n = static_cast<int64_t>(prompt.size());
  DraftVocab subset{.target_vocab_size = target_.config().vocab_size, .token_ids = {}};
  for (int32_t id = 0; id < target_.config().vocab_size; id += 2) subset.token_ids.push_back(id);
  for (const bool restricted : {false, true}) {
    std::unique_ptr<DFlashDrafter> drafter = MakeDrafter();
    if (restricted) drafter->RestrictVocab(subset);
    const int64_t columns = drafter->draft_vocab_size();
    const DraftOutput argmax = DraftAfter(*drafter, prompt, 3);
    int differing_draws = 0, followed = 0;
    for (uint64_t seed = 0; seed < 8; ++seed) {
      const SamplingParams sampling{.temperature = 1.5f, .seed = seed};
      const DraftOutput got = DraftAfter(*drafter, prompt, 3, &sampling);
      EXPECT_EQ(got.column_ids.size(), restricted ? subset.token_ids.size() : 0u);
      std::vector<double> scratch;
      for (int64_t j = 0; j < 15; ++j) {
        const std::span<const float> row(got.logits.data() + j * columns,
                                         static_cast<size_t>(columns));
        const int32_t column =
            SampleDraftColumn(row, 1.5f, StreamUniform(seed, n + 1 + j, UniformStream::kDraft),
                              &scratch);
        ASSERT_EQ(got.tokens[j], restricted ? subset.token_ids[column] : column)
            << "position " << j << " seed " << seed;
        const bool same_row = std::equal(row.begin(), row.end(), argmax.logits.begin() + j * columns);
        if (j == 0 || !GetParam()) {
          ASSERT_TRUE(same_row) << "the backbone's rows never change";
        }
        if (j > 0 && got.tokens[j - 1] != argmax.tokens[j - 1]) followed += !same_row;
      }
      differing_draws += got.tokens != argmax.tokens;
    }
    EXPECT_GT(differing_draws, 0) << "draws are not the argmax";
    if (GetParam()) {
      EXPECT_GT(followed, 0) << "the head reads the drawn tokens";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Heads, DraftVocabDrafterTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Domino" : "Backbone";
                         });

}  // namespace
}  // namespace dscale
