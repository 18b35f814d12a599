#include "spec/prefix_verifier.h"

#include <gtest/gtest.h>

#include <map>

#include "chi_square.h"

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
  for (const SamplingParams params :
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

}  // namespace
}  // namespace dscale
