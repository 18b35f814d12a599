#include "dvl/predictor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "dvl/scoped_temp_dir.h"
#include "float_bounds.h"
#include "io/file_util.h"

namespace dscale::dvl {
namespace {

constexpr int64_t kHidden = 8;
constexpr int64_t kVocab = 40;

Predictor RandomPredictor(uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> normal(0.0f, 0.1f);
  PredictorWeights w = PredictorWeights::Zeros();
  for (auto* v : {&w.feature_mean, &w.w1, &w.b1, &w.w2, &w.b2}) {
    for (float& x : *v) x = normal(rng);
  }
  for (float& x : w.feature_std) x = 0.5f + std::abs(normal(rng));
  return Predictor(MakeProjections(kHidden, kVocab, seed), std::move(w));
}

std::vector<char> Bytes(const std::string& path) {
  const std::string bytes = ReadFileToString(path, kAnyFileSize).value();
  return {bytes.begin(), bytes.end()};
}

void WriteBytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

class PredictorTest : public ::testing::Test {
 protected:
  test_util::ScopedTempDir dir_;
};

// Loads `bytes` from a file and expects an error whose message contains `what` and the path.
void ExpectLoadError(const std::string& path, const std::vector<char>& bytes,
                     const std::string& what, DrafterDims dims = {}) {
  WriteBytes(path, bytes);
  Result<Predictor> p = Predictor::Load(path, dims);
  ASSERT_FALSE(p.ok()) << "expected failure: " << what;
  EXPECT_NE(p.status().message().find(what), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find(path), std::string::npos) << p.status().message();
}

void PutU32(std::vector<char>& bytes, size_t offset, uint32_t v) {
  std::memcpy(bytes.data() + offset, &v, 4);
}

TEST_F(PredictorTest, SaveLoadRoundTrip) {
  const Predictor p = RandomPredictor(3);
  const std::string path = dir_.File("roundtrip.bin");
  ASSERT_TRUE(p.Save(path).ok());
  EXPECT_EQ(std::filesystem::file_size(path),
            static_cast<uintmax_t>(kPredictorHeaderBytes) +
                4 * (kHidden * 64 + kVocab * 32 + 2 * 1735 + 1735 * 64 + 64 + 64 * 15 + 15));
  Result<Predictor> q = Predictor::Load(path, {.hidden_size = kHidden, .vocab_size = kVocab});
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->projections().hidden, p.projections().hidden);
  EXPECT_EQ(q->projections().logit, p.projections().logit);
  EXPECT_EQ(q->projections().logit_column_sum, p.projections().logit_column_sum);
  EXPECT_EQ(q->projections().seed, 3u);
  EXPECT_EQ(q->weights().w1, p.weights().w1);
  EXPECT_EQ(q->weights().b2, p.weights().b2);
  EXPECT_EQ(q->weights().feature_std, p.weights().feature_std);
}

TEST_F(PredictorTest, ForwardMatchesNaiveMlp) {
  const Predictor p = RandomPredictor(4);
  const PredictorWeights& w = p.weights();
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> features(3 * kFeatureCount);
  for (float& x : features) x = normal(rng);
  std::vector<float> logits(3 * kDraftPositions);
  p.Forward(features.data(), 3, logits.data());
  // Float products against a double reference: hidden unit h is within
  // γ_(D+1)·(|b1_h| + Σ_d|x_d·w1_dh|) of exact (plus u·|x_d| from standardising each feature in
  // float, folded in as one more γ term), ReLU does not widen an error, and output o is within
  // γ_(H+1)·(|b2_o| + Σ_h|hidden_h·w2_ho|) + Σ_h error_h·|w2_ho|.
  for (int i = 0; i < 3; ++i) {
    std::vector<double> hidden(kPredictorHidden), hidden_error(kPredictorHidden);
    for (int h = 0; h < kPredictorHidden; ++h) {
      double sum = w.b1[h], mass = std::abs(w.b1[h]);
      for (int d = 0; d < kFeatureCount; ++d) {
        const double x = (features[i * kFeatureCount + d] - w.feature_mean[d]) / w.feature_std[d];
        sum += x * w.w1[d * kPredictorHidden + h];
        mass += std::abs(x * w.w1[d * kPredictorHidden + h]);
      }
      hidden[h] = std::max(sum, 0.0);
      hidden_error[h] = testing::FloatGamma(kFeatureCount + 3) * mass;
    }
    for (int o = 0; o < kDraftPositions; ++o) {
      double sum = w.b2[o], mass = std::abs(w.b2[o]), carried = 0.0;
      for (int h = 0; h < kPredictorHidden; ++h) {
        sum += hidden[h] * w.w2[h * kDraftPositions + o];
        mass += std::abs(hidden[h] * w.w2[h * kDraftPositions + o]);
        carried += hidden_error[h] * std::abs(w.w2[h * kDraftPositions + o]);
      }
      const double bound = testing::FloatGamma(kPredictorHidden + 1) * mass + carried;
      EXPECT_NEAR(logits[i * kDraftPositions + o], sum, bound) << "request " << i << " out " << o;
    }
  }
}

TEST_F(PredictorTest, RejectsEveryCorruption) {
  const std::string path = dir_.File("good.bin");
  ASSERT_TRUE(RandomPredictor(5).Save(path).ok());
  const std::vector<char> good = Bytes(path);
  const std::string bad_path = dir_.File("corrupt.bin");

  std::vector<char> bad = good;
  bad[0] = 'X';
  ExpectLoadError(bad_path, bad, "bad magic");

  bad = good;
  PutU32(bad, 8, 2);
  ExpectLoadError(bad_path, bad, "unsupported version 2");

  bad = good;
  PutU32(bad, 12, 1736);
  ExpectLoadError(bad_path, bad, "feature count is 1736");

  bad = good;
  PutU32(bad, 16, 32);
  ExpectLoadError(bad_path, bad, "MLP hidden width is 32");

  bad = good;
  PutU32(bad, 20, 16);
  ExpectLoadError(bad_path, bad, "output count is 16");

  bad = good;
  PutU32(bad, 32, 0);
  ExpectLoadError(bad_path, bad, "drafter hidden size 0");

  ExpectLoadError(bad_path, good, "drafter hidden size 8, but the running drafter has 4096",
                  {.hidden_size = 4096});
  ExpectLoadError(bad_path, good, "vocabulary size 40, but the running drafter has 151936",
                  {.vocab_size = 151936});

  ExpectLoadError(bad_path, std::vector<char>(good.begin(), good.begin() + 20), "truncated header");
  ExpectLoadError(bad_path, std::vector<char>(good.begin(), good.end() - 1), "truncated");

  bad = good;
  bad.push_back('\0');
  ExpectLoadError(bad_path, bad, "1 trailing bytes");

  // A NaN in w1 (first entry after the projections and the normalisation statistics).
  bad = good;
  const size_t w1_offset = kPredictorHeaderBytes + 4 * (kHidden * 64 + kVocab * 32 + 2 * 1735);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bad.data() + w1_offset, &nan, 4);
  ExpectLoadError(bad_path, bad, "w1[0] is not finite");

  // A zero std.
  bad = good;
  const size_t std_offset = kPredictorHeaderBytes + 4 * (kHidden * 64 + kVocab * 32 + 1735 + 7);
  const float zero = 0.0f;
  std::memcpy(bad.data() + std_offset, &zero, 4);
  ExpectLoadError(bad_path, bad, "feature std[7] is 0");

  Result<Predictor> missing = Predictor::Load(dir_.File("does_not_exist.bin"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace dscale::dvl
