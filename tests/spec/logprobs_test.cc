#include "spec/logprobs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace dscale {
namespace {

// log softmax(logits / t)[v] in long double, written out: the reference.
long double ReferenceLogprob(const std::vector<float>& logits, int64_t v, long double t = 1.0L) {
  long double sum = 0.0L;
  for (const float l : logits) sum += std::exp(static_cast<long double>(l) / t);
  return static_cast<long double>(logits[v]) / t - std::log(sum);
}

std::vector<float> RandomLogits(int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (float& l : logits) l = normal(rng);
  return logits;
}

// A float rounding of a double computation: a few ulps of the largest magnitude involved.
constexpr double kTolerance = 1e-5;

TEST(LogprobsTest, GreedyRequestsGetTheModelsLogSoftmaxAndItsTopTokensInOrder) {
  for (const int64_t vocab : {1, 7, 33, 1001}) {
    const std::vector<float> logits = RandomLogits(vocab, static_cast<uint32_t>(vocab));
    std::vector<double> scratch;
    TokenLogprobs out;
    const int32_t token = static_cast<int32_t>(vocab / 2);
    const int32_t top = static_cast<int32_t>(std::min<int64_t>(vocab, 5));
    ASSERT_TRUE(ComputeTokenLogprobs(logits, SamplingParams{}, token, top, &scratch, &out).ok());
    EXPECT_EQ(out.token, token);
    EXPECT_NEAR(out.logprob, static_cast<double>(ReferenceLogprob(logits, token)), kTolerance);
    ASSERT_EQ(static_cast<int64_t>(out.top.size()), top) << vocab;
    for (size_t i = 0; i < out.top.size(); ++i) {
      const TopLogprob& t = out.top[i];
      EXPECT_NEAR(t.logprob, static_cast<double>(ReferenceLogprob(logits, t.token)), kTolerance);
      if (i > 0) {
        EXPECT_GE(out.top[i - 1].logprob, t.logprob);
      }
    }
    // Nothing outside the list is more likely than its last entry.
    for (int64_t v = 0; v < vocab; ++v) {
      bool listed = false;
      for (const TopLogprob& t : out.top) listed |= t.token == v;
      if (!listed) {
        EXPECT_LE(logits[v], logits[out.top.back().token]);
      }
    }
  }
}

TEST(LogprobsTest, TiesListTheLowerIdFirstAndTopZeroListsNothing) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 0.5f, 3.0f};
  std::vector<double> scratch;
  TokenLogprobs out;
  ASSERT_TRUE(ComputeTokenLogprobs(logits, SamplingParams{}, 4, 3, &scratch, &out).ok());
  ASSERT_EQ(out.top.size(), 3u);
  EXPECT_EQ(out.top[0].token, 1);
  EXPECT_EQ(out.top[1].token, 2);
  EXPECT_EQ(out.top[2].token, 4);
  EXPECT_EQ(out.top[0].logprob, out.logprob);
  ASSERT_TRUE(ComputeTokenLogprobs(logits, SamplingParams{}, 0, 0, &scratch, &out).ok());
  EXPECT_TRUE(out.top.empty());
  EXPECT_NEAR(out.logprob, static_cast<double>(ReferenceLogprob(logits, 0)), kTolerance);
}

TEST(LogprobsTest, SampledRequestsGetTheFilteredDistributionTheySampleFrom) {
  const std::vector<float> logits = RandomLogits(50, 3);
  std::vector<double> scratch;
  TokenLogprobs out;
  // Temperature alone: log softmax(logits / T).
  const SamplingParams warm{.temperature = 0.7f};
  ASSERT_TRUE(ComputeTokenLogprobs(logits, warm, 9, 4, &scratch, &out).ok());
  EXPECT_NEAR(out.logprob, static_cast<double>(ReferenceLogprob(logits, 9, 0.7L)), kTolerance);
  // top_k = 3: the three largest renormalised; every other token is impossible and unlisted.
  const SamplingParams top3{.temperature = 1.0f, .top_k = 3};
  std::vector<int32_t> order(50);
  for (int32_t v = 0; v < 50; ++v) order[v] = v;
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  ASSERT_TRUE(ComputeTokenLogprobs(logits, top3, order[3], 10, &scratch, &out).ok());
  EXPECT_EQ(out.logprob, -std::numeric_limits<float>::infinity());
  ASSERT_EQ(out.top.size(), 3u);
  long double kept = 0.0L;
  for (int i = 0; i < 3; ++i) kept += std::exp(static_cast<long double>(logits[order[i]]));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out.top[i].token, order[i]);
    const long double want = static_cast<long double>(logits[order[i]]) - std::log(kept);
    EXPECT_NEAR(out.top[i].logprob, static_cast<double>(want), kTolerance);
  }
}

TEST(LogprobsTest, ANonFiniteLogitIsAnErrorNamingTheToken) {
  std::vector<float> logits(8, 0.0f);
  logits[6] = std::numeric_limits<float>::quiet_NaN();
  std::vector<double> scratch;
  TokenLogprobs out;
  const Status greedy = ComputeTokenLogprobs(logits, SamplingParams{}, 0, 2, &scratch, &out);
  EXPECT_FALSE(greedy.ok());
  EXPECT_NE(greedy.message().find("token 6"), std::string::npos) << greedy.message();
  EXPECT_FALSE(ComputeTokenLogprobs(logits, {.temperature = 1.0f}, 0, 2, &scratch, &out).ok());
}

}  // namespace
}  // namespace dscale
