#include "spec/prefix_verifier.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>

#include "chi_square.h"
#include "spec/position_uniform.h"

namespace dscale {
namespace {

// Rows of logits over a 4-token vocabulary whose argmaxes are `argmaxes`.
std::vector<float> Rows(const std::vector<int32_t>& argmaxes) {
  std::vector<float> logits;
  for (int32_t a : argmaxes) {
    for (int32_t v = 0; v < 4; ++v) logits.push_back(v == a ? 2.0f : 0.1f * v);
  }
  return logits;
}

TEST(PrefixVerifierTest, GreedyAcceptsTheMatchingPrefix) {
  const std::vector<float> logits = Rows({2, 0, 3, 1});
  VerifyResult r = VerifyGreedy(logits, 4, std::vector<int32_t>{2, 0, 3});
  EXPECT_EQ(r.accepted, 3);
  EXPECT_EQ(r.next_token, 1);
  r = VerifyGreedy(logits, 4, std::vector<int32_t>{2, 1, 3});
  EXPECT_EQ(r.accepted, 1);
  EXPECT_EQ(r.next_token, 0);
  r = VerifyGreedy(logits, 4, std::vector<int32_t>{0, 0, 3});
  EXPECT_EQ(r.accepted, 0);
  EXPECT_EQ(r.next_token, 2);
  r = VerifyGreedy(std::span(logits).first(4), 4, {});  // anchor only: plain decoding
  EXPECT_EQ(r.accepted, 0);
  EXPECT_EQ(r.next_token, 2);
}

// Speculative sampling reproduces plain sampling: the first token is distributed as P_0 and,
// when it equals the draft, the second as P_1 — for a likely draft, an unlikely one and one
// outside the top-k set.
TEST(PrefixVerifierTest, SampledVerificationMatchesPlainSampling) {
  const std::vector<float> logits = {0.3f, 1.2f, -0.4f, 0.9f, 0.0f,   // row 0
                                     1.0f, -1.0f, 0.2f, 0.4f, 0.8f};  // row 1
  const int64_t vocab = 5;
  for (const SamplingParams& params :
       {SamplingParams{.temperature = 1.0f}, SamplingParams{.temperature = 0.6f, .top_k = 3},
        SamplingParams{.temperature = 1.3f, .top_p = 0.7f}}) {
    std::vector<double> p0, p1;
    TargetDistribution(std::span(logits).first(5), params, &p0);
    TargetDistribution(std::span(logits).last(5), params, &p1);
    for (int32_t draft : {1, 2}) {
      RequestRng rng(17 + draft);
      std::vector<double> scratch;
      std::vector<int64_t> first(vocab, 0), second(vocab, 0);
      const int trials = 100000;
      for (int t = 0; t < trials; ++t) {
        const VerifyResult r =
            VerifySampled(logits, vocab, std::vector<int32_t>{draft}, params, rng, &scratch);
        if (r.accepted == 1) {
          ++first[draft];
          ++second[r.next_token];
        } else {
          ASSERT_NE(r.next_token, draft) << "a rejected draft is never resampled";
          ++first[r.next_token];
        }
      }
      const testing::ChiSquareResult a = testing::ChiSquareTest(first, p0);
      EXPECT_GT(a.p_value, 0.001) << "first token, draft " << draft << " chi2 " << a.statistic;
      if (p0[draft] > 0.05) {
        const testing::ChiSquareResult b = testing::ChiSquareTest(second, p1);
        EXPECT_GT(b.p_value, 0.001) << "second token, draft " << draft;
      }
    }
  }
}

// Position-indexed sampling: the same law as above (a chi-square over seeds), and the tokens it
// emits are exactly plain sampling's at those positions whatever the drafts and their number.
TEST(PrefixVerifierTest, PositionIndexedSamplingEmitsPlainSamplingsTokens) {
  const std::vector<float> logits = {0.3f,  1.2f,  -0.4f, 0.9f, 0.0f,   // row 0
                                     1.0f,  -1.0f, 0.2f,  0.4f, 0.8f,   // row 1
                                     -0.2f, 0.5f,  0.5f,  0.1f, 1.1f};  // row 2
  const int64_t vocab = 5;
  const SamplingParams params{.temperature = 0.9f, .top_k = 4};
  std::vector<std::vector<double>> p(3);
  for (int j = 0; j < 3; ++j)
    TargetDistribution(std::span(logits).subspan(j * 5, 5), params, &p[j]);
  std::vector<double> scratch;
  std::vector<int64_t> first(vocab, 0);
  const int64_t position = 40;
  for (uint64_t seed = 0; seed < 60000; ++seed) {
    // Plain sampling's tokens at positions 40, 41, 42 (taken as given for the rows' logits).
    std::vector<int32_t> plain(3);
    for (int j = 0; j < 3; ++j) plain[j] = SampleIndex(p[j], PositionUniform(seed, position + j));
    for (const std::vector<int32_t>& drafts :
         {std::vector<int32_t>{}, std::vector<int32_t>{1}, std::vector<int32_t>{1, 4},
          std::vector<int32_t>{plain[0], plain[1]}, std::vector<int32_t>{plain[0], 2}}) {
      const auto rows = std::span(logits).first((drafts.size() + 1) * vocab);
      const VerifyResult r =
          VerifySampledAt(rows, vocab, drafts, params, seed, position, &scratch).value();
      for (int j = 0; j < r.accepted; ++j) ASSERT_EQ(drafts[j], plain[j]);
      ASSERT_EQ(r.next_token, plain[r.accepted]) << "seed " << seed;
      if (r.accepted < static_cast<int32_t>(drafts.size())) {
        ASSERT_NE(drafts[r.accepted], r.next_token) << "a rejected draft is never resampled";
      }
    }
    ++first[plain[0]];
  }
  const testing::ChiSquareResult a = testing::ChiSquareTest(first, p[0]);
  EXPECT_GT(a.p_value, 0.001) << "chi2 " << a.statistic;
}

// A NaN row anywhere a decision rests on fails the verification instead of aborting or
// emitting an arbitrary token.
TEST(PrefixVerifierTest, NonFiniteRowsFailVerification) {
  const int64_t vocab = 4;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Row 0 prefers token 2 (the draft), row 1 is all NaN.
  const std::vector<float> logits = {0.0f, 1.0f, 5.0f, 0.0f, nan, nan, nan, nan};
  const std::vector<int32_t> drafts = {2};
  std::vector<double> scratch;
  const Result<VerifyResult> greedy = VerifyGreedyChecked(logits, vocab, drafts);
  ASSERT_FALSE(greedy.ok());
  EXPECT_NE(greedy.status().message().find("NaN"), std::string::npos);
  // Row 0 alone is fine.
  const Result<VerifyResult> first =
      VerifyGreedyChecked(std::span(logits).first(vocab), vocab, std::span<const int32_t>());
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->next_token, 2);
  const SamplingParams params{.temperature = 0.8f};
  bool failed = false;
  for (uint64_t seed = 0; seed < 50; ++seed) {  // whether or not the draft passes, row 1 fails
    const Result<VerifyResult> r =
        VerifySampledAt(logits, vocab, drafts, params, seed, 7, &scratch);
    if (!r.ok()) {
      failed = true;
      EXPECT_NE(r.status().message().find("token 0 is NaN"), std::string::npos);
    } else {
      EXPECT_EQ(r->accepted, 0) << "only a rejected draft stops before row 1";
    }
  }
  EXPECT_TRUE(failed);
}

TEST(PositionUniformTest, IsAPureFunctionInZeroOne) {
  EXPECT_EQ(PositionUniform(7, 3), PositionUniform(7, 3));
  EXPECT_NE(PositionUniform(7, 3), PositionUniform(7, 4));
  EXPECT_NE(PositionUniform(7, 3), PositionUniform(8, 3));
  double sum = 0;
  for (int64_t p = 0; p < 100000; ++p) {
    const double u = PositionUniform(1, p);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
}

}  // namespace
}  // namespace dscale
