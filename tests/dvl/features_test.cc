#include "dvl/features.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "dvl/deterministic_random.h"
#include "float_bounds.h"

namespace dscale::dvl {
namespace {

std::vector<float> RandomVector(size_t size, std::mt19937& rng, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(size);
  for (float& x : v) x = normal(rng);
  return v;
}

// The 18 confidence values by full sort and direct formulas, in double.
std::vector<double> NaiveConfidence(const float* row, int64_t vocab) {
  std::vector<double> sorted(row, row + vocab);
  std::sort(sorted.begin(), sorted.end(), std::greater<double>());
  double z = 0.0;
  for (int64_t v = 0; v < vocab; ++v) z += std::exp(row[v] - sorted[0]);
  double entropy = 0.0;
  for (int64_t v = 0; v < vocab; ++v) {
    const double log_p = row[v] - sorted[0] - std::log(z);
    entropy -= std::exp(log_p) * log_p;
  }
  std::vector<double> out = {sorted[0]};
  for (int r = 1; r < kTopRanks; ++r) out.push_back(sorted[0] - sorted[r]);
  out.push_back(-std::log(z));
  out.push_back(entropy);
  return out;
}

TEST(FeaturesTest, BlockOffsets) {
  EXPECT_EQ(kConfidenceOffset, 0);
  EXPECT_EQ(kHiddenProjOffset, 270);
  EXPECT_EQ(kLogitProjOffset, 1230);
  EXPECT_EQ(kBatchContextOffset, 1710);
  EXPECT_EQ(kFeatureCount, 1735);
}

TEST(FeaturesTest, MatchesNaiveComputationSlotBySlot) {
  constexpr int64_t kVocab = 300;
  constexpr int64_t kHidden = 24;
  std::mt19937 rng(1);
  const Projections proj = MakeProjections(kHidden, kVocab, 99);
  std::vector<float> logits = RandomVector(kDraftPositions * kVocab, rng, 3.0f);
  logits[5] = logits[6] = logits[7] = 40.0f;  // tied top logits in position 1
  const std::vector<float> hidden = RandomVector(kDraftPositions * kHidden, rng, 1.0f);
  std::vector<float> f(kFeatureCount, -123.0f);
  ExtractFeatures(logits.data(), hidden.data(), 7, proj, f.data());

  for (int j = 0; j < kDraftPositions; ++j) {
    SCOPED_TRACE("position " + std::to_string(j + 1));
    const float* row = logits.data() + j * kVocab;
    const std::vector<double> conf = NaiveConfidence(row, kVocab);
    for (int c = 0; c < kConfidencePerPosition; ++c) {
      EXPECT_NEAR(f[j * kConfidencePerPosition + c], conf[c], 1e-4 * (1 + std::abs(conf[c])))
          << "confidence slot " << c;
    }
    double mean = 0.0, abs_sum = 0.0;
    for (int64_t v = 0; v < kVocab; ++v) {
      mean += row[v];
      abs_sum += std::abs(row[v]);
    }
    mean /= kVocab;
    // The centred projection is fl(x·P) − m·(1ᵀP), rounded to float: the float product is
    // within γ_V·Σ|x_v·P_vc| of exact, the float-lane mean within γ_V·Σ|x_v|/V (times the
    // column sum), and the final rounding adds u·|result|.
    for (int c = 0; c < kLogitProjDim; ++c) {
      double want = 0.0, mass = 0.0;
      for (int64_t v = 0; v < kVocab; ++v) {
        want += (row[v] - mean) * proj.logit[v * kLogitProjDim + c];
        mass += std::abs(row[v] * double{proj.logit[v * kLogitProjDim + c]});
      }
      const double bound = testing::FloatGamma(kVocab) *
                               (mass + abs_sum / kVocab * std::abs(proj.logit_column_sum[c])) +
                           testing::kFloatUnitRoundoff * std::abs(want);
      EXPECT_NEAR(f[kLogitProjOffset + j * kLogitProjDim + c], want, bound);
    }
    // The hidden projection is one float dot product: within γ_H·Σ|h_k·P_kc| of exact.
    for (int c = 0; c < kHiddenProjDim; ++c) {
      double want = 0.0, mass = 0.0;
      for (int64_t h = 0; h < kHidden; ++h) {
        const double term = hidden[j * kHidden + h] * double{proj.hidden[h * kHiddenProjDim + c]};
        want += term;
        mass += std::abs(term);
      }
      EXPECT_NEAR(f[kHiddenProjOffset + j * kHiddenProjDim + c], want,
                  testing::FloatGamma(kHidden) * mass);
    }
  }
  // Tied top logits: the gaps to ranks 2 and 3 are exactly zero.
  EXPECT_EQ(f[1], 0.0f);
  EXPECT_EQ(f[2], 0.0f);
  EXPECT_GT(f[3], 0.0f);
}

// Logits that are an LM head's products W·h: the logit block folded through W equals the
// centred projection of the exact logits within the floats' bound, for a head of more rows
// than one fold block (1,024), and every other feature is the same bits as without the fold.
TEST(FeaturesTest, LogitProjectionFoldedThroughTheHead) {
  constexpr int64_t kVocab = 2100;
  constexpr int64_t kHidden = 24;
  constexpr int64_t kRequests = 2;
  std::mt19937 rng(3);
  std::vector<float> head = RandomVector(kVocab * kHidden, rng, 0.5f);  // W [V, H]
  std::vector<float> hidden = RandomVector(kRequests * kDraftPositions * kHidden, rng, 1.0f);
  // Input 0 lifts every logit by 6, so that the centring shows.
  for (int64_t v = 0; v < kVocab; ++v) head[v * kHidden] = 2.0f;
  for (int64_t row = 0; row < kRequests * kDraftPositions; ++row) hidden[row * kHidden] = 3.0f;
  std::vector<double> exact(kRequests * kDraftPositions * kVocab);
  std::vector<float> logits(exact.size());
  for (int64_t row = 0; row < kRequests * kDraftPositions; ++row) {
    for (int64_t v = 0; v < kVocab; ++v) {
      double sum = 0.0;
      for (int64_t i = 0; i < kHidden; ++i) {
        sum += double{hidden[row * kHidden + i]} * head[v * kHidden + i];
      }
      exact[row * kVocab + v] = sum;
      logits[row * kVocab + v] = static_cast<float>(sum);
    }
  }
  const Projections plain = MakeProjections(kHidden, kVocab, 5);
  Projections folded = plain;
  int64_t rows_read = 0;
  FoldLogitProjection(folded, [&](int64_t first, int64_t count, float* out) {
    std::copy_n(head.data() + first * kHidden, count * kHidden, out);
    rows_read += count;
  });
  EXPECT_EQ(rows_read, kVocab);
  ASSERT_EQ(folded.head_logit.size(), static_cast<size_t>(kHidden * kLogitProjDim));

  std::vector<float> a(kRequests * kFeatureCount), b(a.size());
  ExtractFeaturesBatch(logits.data(), hidden.data(), kRequests, 4, plain, a.data());
  ExtractFeaturesBatch(logits.data(), hidden.data(), kRequests, 4, folded, b.data());
  for (int64_t i = 0; i < kRequests; ++i) {
    for (int64_t f = 0; f < kFeatureCount; ++f) {
      const bool logit_block =
          f >= kLogitProjOffset && f < kLogitProjOffset + kDraftPositions * kLogitProjDim;
      if (!logit_block) {
        ASSERT_EQ(a[i * kFeatureCount + f], b[i * kFeatureCount + f]) << f;
      }
    }
  }
  // F = Wᵀ·(P − 1·(1ᵀP)/V) is summed in floats over V terms a column (each P entry shifted and
  // rounded once), then h·F over H: each result within γ_(V+H+1)·Σ_i Σ_v |h_i·W_vi·P̃_vc| of
  // the exact centred projection, plus its own rounding.
  const double u = testing::kFloatUnitRoundoff;
  for (int64_t row = 0; row < kRequests * kDraftPositions; ++row) {
    SCOPED_TRACE("row " + std::to_string(row));
    double mean = 0.0;
    for (int64_t v = 0; v < kVocab; ++v) mean += exact[row * kVocab + v];
    mean /= kVocab;
    for (int c = 0; c < kLogitProjDim; ++c) {
      const double shift = plain.logit_column_sum[c] / kVocab;
      double want = 0.0, mass = 0.0;
      for (int64_t v = 0; v < kVocab; ++v) {
        const double p = plain.logit[v * kLogitProjDim + c];
        want += (exact[row * kVocab + v] - mean) * p;
        for (int64_t i = 0; i < kHidden; ++i) {
          mass += std::abs(double{hidden[row * kHidden + i]} * head[v * kHidden + i] * (p - shift));
        }
      }
      const float got = b[(row / kDraftPositions) * kFeatureCount + kLogitProjOffset +
                          (row % kDraftPositions) * kLogitProjDim + c];
      EXPECT_NEAR(got, want, testing::FloatGamma(kVocab + kHidden + 1) * mass + u * std::abs(want))
          << "column " << c;
    }
  }
}

TEST(FeaturesTest, BatchContextLayout) {
  const Projections proj = MakeProjections(8, 20, 1);
  const std::vector<float> logits(kDraftPositions * 20, 0.5f);
  const std::vector<float> hidden(kDraftPositions * 8, 0.25f);
  std::vector<float> f(kFeatureCount, -1.0f);
  ExtractFeatures(logits.data(), hidden.data(), 13, proj, f.data());
  for (int c = 0; c < kBatchContextDim; ++c) {
    const float want = c == 0 ? 13.0f : (c == 3 ? 1.0f : 0.0f);
    EXPECT_EQ(f[kBatchContextOffset + c], want) << "context entry " << c;
  }
  // Uniform logits: no gaps, log-probability −log V, entropy log V, centred logits all zero.
  EXPECT_FLOAT_EQ(f[0], 0.5f);
  EXPECT_EQ(f[1], 0.0f);
  EXPECT_NEAR(f[16], -std::log(20.0), 1e-6);
  EXPECT_NEAR(f[17], std::log(20.0), 1e-6);
  // The centred projection of a constant row is zero. It is computed as x·P − mean·(1ᵀP) with
  // x·P a float product, so the zero holds to that product's rounding: at most
  // V·ε·Σ_r |x_r·P_rc| (the worst-case bound of a float dot product).
  for (int c = 0; c < kDraftPositions * kLogitProjDim; ++c) {
    double mass = 0.0;
    for (int64_t r = 0; r < 20; ++r)
      mass += std::abs(0.5 * proj.logit[r * kLogitProjDim + c % kLogitProjDim]);
    EXPECT_NEAR(f[kLogitProjOffset + c], 0.0, 20 * 1.2e-7 * mass) << "column " << c;
  }
}

// A request's features are the same whether it is extracted alone or in a batch. The
// confidence and batch-context blocks come from the same per-row code in the same order, so
// they are bit-identical. The two projection blocks are BLAS products over 15 rows or 45 rows,
// whose blockings (and so summation orders) differ by row count and CPU: each feature is a dot
// product of K terms, so the two agree to DotProductOrderBound(K, Σ|x_k·P_kc|), plus one float
// rounding of each side for the logit block's centring, which is done in double.
TEST(FeaturesTest, BatchMatchesPerRequest) {
  constexpr int64_t kVocab = 64;
  constexpr int64_t kHidden = 16;
  constexpr int64_t kRequests = 3;
  std::mt19937 rng(2);
  const Projections proj = MakeProjections(kHidden, kVocab, 5);
  const std::vector<float> logits = RandomVector(kRequests * kDraftPositions * kVocab, rng, 2.0f);
  const std::vector<float> hidden = RandomVector(kRequests * kDraftPositions * kHidden, rng, 1.0f);
  std::vector<float> batch(kRequests * kFeatureCount);
  ExtractFeaturesBatch(logits.data(), hidden.data(), kRequests, 3, proj, batch.data());
  for (int64_t i = 0; i < kRequests; ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    const float* request_logits = logits.data() + i * kDraftPositions * kVocab;
    const float* request_hidden = hidden.data() + i * kDraftPositions * kHidden;
    std::vector<float> one(kFeatureCount);
    ExtractFeatures(request_logits, request_hidden, 3, proj, one.data());
    const float* in_batch = batch.data() + i * kFeatureCount;
    for (int64_t f = 0; f < kHiddenProjOffset; ++f) {
      ASSERT_EQ(one[f], in_batch[f]) << "confidence feature " << f;
    }
    for (int64_t f = kBatchContextOffset; f < kFeatureCount; ++f) {
      ASSERT_EQ(one[f], in_batch[f]) << "batch-context feature " << f;
    }
    for (int j = 0; j < kDraftPositions; ++j) {
      for (int c = 0; c < kHiddenProjDim; ++c) {
        double mass = 0.0;
        for (int64_t h = 0; h < kHidden; ++h) {
          mass += std::abs(double{request_hidden[j * kHidden + h]} *
                           proj.hidden[h * kHiddenProjDim + c]);
        }
        const int64_t f = kHiddenProjOffset + j * kHiddenProjDim + c;
        ASSERT_LE(std::abs(double{one[f]} - in_batch[f]),
                  testing::DotProductOrderBound(kHidden, mass))
            << "hidden projection, position " << j << " column " << c;
      }
      for (int c = 0; c < kLogitProjDim; ++c) {
        double mass = 0.0;
        for (int64_t v = 0; v < kVocab; ++v) {
          mass +=
              std::abs(double{request_logits[j * kVocab + v]} * proj.logit[v * kLogitProjDim + c]);
        }
        const int64_t f = kLogitProjOffset + j * kLogitProjDim + c;
        const double rounding =
            testing::kFloatUnitRoundoff * (std::abs(double{one[f]}) + std::abs(in_batch[f]));
        ASSERT_LE(std::abs(double{one[f]} - in_batch[f]),
                  testing::DotProductOrderBound(kVocab, mass) + rounding)
            << "logit projection, position " << j << " column " << c;
      }
    }
  }
}

TEST(FeaturesTest, PartialSelectionAtFullVocabulary) {
  constexpr int64_t kVocab = 151936;
  std::mt19937 rng(4);
  const std::vector<float> row = RandomVector(kVocab, rng, 4.0f);
  float f[kConfidencePerPosition];
  ConfidenceFeatures(row.data(), kVocab, f);
  const std::vector<double> want = NaiveConfidence(row.data(), kVocab);
  for (int c = 0; c < kConfidencePerPosition; ++c) {
    EXPECT_NEAR(f[c], want[c], 1e-4 * (1 + std::abs(want[c]))) << "slot " << c;
  }
}

TEST(FeaturesTest, ProjectionsAreDeterministicAndScaled) {
  const Projections a = MakeProjections(256, 1000, 42);
  const Projections b = MakeProjections(256, 1000, 42);
  const Projections c = MakeProjections(256, 1000, 43);
  EXPECT_EQ(a.hidden, b.hidden);
  EXPECT_EQ(a.logit, b.logit);
  EXPECT_NE(a.hidden, c.hidden);
  EXPECT_NE(std::vector<float>(a.hidden.begin(), a.hidden.begin() + 64),
            std::vector<float>(a.logit.begin(), a.logit.begin() + 64));
  ASSERT_EQ(a.hidden.size(), 256u * kHiddenProjDim);
  ASSERT_EQ(a.logit.size(), 1000u * kLogitProjDim);
  // N(0, 1/in): the sample variance times `in` is close to 1.
  double sum_sq = 0.0;
  for (float v : a.hidden) sum_sq += v * v;
  EXPECT_NEAR(sum_sq / a.hidden.size() * 256, 1.0, 0.05);
  sum_sq = 0.0;
  for (float v : a.logit) sum_sq += v * v;
  EXPECT_NEAR(sum_sq / a.logit.size() * 1000, 1.0, 0.05);
  // The derived column sums the feature centring uses.
  ASSERT_EQ(a.logit_column_sum.size(), static_cast<size_t>(kLogitProjDim));
  for (int k = 0; k < kLogitProjDim; ++k) {
    double sum = 0.0;
    for (int64_t r = 0; r < 1000; ++r) sum += a.logit[r * kLogitProjDim + k];
    EXPECT_DOUBLE_EQ(a.logit_column_sum[k], sum) << "column " << k;
  }
}

TEST(FeaturesTest, GeneratorIsPinned) {
  // Changing the generator would silently change every collected trace; these values pin it.
  DeterministicRandom rng(0);
  EXPECT_EQ(rng.NextU64(), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(rng.NextU64(), 0x6E789E6AA1B965F4ULL);
  // The first output of reference SplitMix64 seeded with 1234567 (the stateless mix of it).
  EXPECT_EQ(SplitMix64Mix(1234567), 0x599ED017FB08FC85ULL);
  const Projections p = MakeProjections(4, 16, 7);
  const float pinned[4] = {-0.238064557f, -0.326390952f, -0.434023619f, -0.333333343f};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(p.hidden[i], pinned[i], 1e-6f) << i;
}

}  // namespace
}  // namespace dscale::dvl
