#include "spec/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

namespace dscale {
namespace {

std::vector<double> Softmax(const std::vector<float>& logits, double t) {
  std::vector<double> p;
  double total = 0;
  for (float l : logits) total += std::exp(l / t);
  for (float l : logits) p.push_back(std::exp(l / t) / total);
  return p;
}

TEST(SamplingTest, TemperatureScalesTheSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f};
  std::vector<double> probs;
  TargetDistribution(logits, {.temperature = 0.7f}, &probs);
  const std::vector<double> expected = Softmax(logits, static_cast<double>(0.7f));
  for (size_t i = 0; i < logits.size(); ++i) EXPECT_NEAR(probs[i], expected[i], 1e-12);
}

TEST(SamplingTest, TopKKeepsTheKMostLikelyWithLowerIdsOnTies) {
  const std::vector<float> logits = {3.0f, 1.0f, 3.0f, 2.0f, 3.0f};
  std::vector<double> probs;
  TargetDistribution(logits, {.temperature = 1.0f, .top_k = 2}, &probs);
  EXPECT_NEAR(probs[0], 0.5, 1e-12);
  EXPECT_NEAR(probs[2], 0.5, 1e-12);
  EXPECT_EQ(probs[1] + probs[3] + probs[4], 0.0);
}

TEST(SamplingTest, TopPKeepsTheSmallestNucleus) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 (as logits of their logs).
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f),
                                     std::log(0.05f)};
  std::vector<double> probs;
  TargetDistribution(logits, {.temperature = 1.0f, .top_p = 0.75f}, &probs);
  EXPECT_NEAR(probs[0], 0.5 / 0.8, 1e-6);
  EXPECT_NEAR(probs[1], 0.3 / 0.8, 1e-6);
  EXPECT_EQ(probs[2] + probs[3], 0.0);
  TargetDistribution(logits, {.temperature = 1.0f, .top_p = 0.81f}, &probs);
  EXPECT_GT(probs[2], 0.0);
  // top-k then top-p within the kept set.
  TargetDistribution(logits, {.temperature = 1.0f, .top_k = 2, .top_p = 0.6f}, &probs);
  EXPECT_NEAR(probs[0], 1.0, 1e-9);
}

TEST(SamplingTest, MinPKeepsTokensNearTheLikeliestBeforeTopKAndTopP) {
  // Probabilities 0.5, 0.3, 0.15, 0.05: min_p 0.2 puts the floor at 0.1.
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f),
                                     std::log(0.05f)};
  std::vector<double> probs;
  TargetDistribution(logits, {.temperature = 1.0f, .min_p = 0.2f}, &probs);
  EXPECT_NEAR(probs[0], 0.5 / 0.95, 1e-6);
  EXPECT_NEAR(probs[1], 0.3 / 0.95, 1e-6);
  EXPECT_NEAR(probs[2], 0.15 / 0.95, 1e-6);
  EXPECT_EQ(probs[3], 0.0);
  // The floor is relative to the likeliest at this temperature: at T = 2 the probabilities are
  // ∝ √p, so the last is 0.316 of the first and stays above a floor of 0.3.
  TargetDistribution(logits, {.temperature = 2.0f, .min_p = 0.3f}, &probs);
  EXPECT_GT(probs[3], 0.0);
  // min_p first, then top-p over what it kept: 0.5 / 0.95 = 0.526 ≥ 0.52 keeps one token, where
  // top-p alone (0.5 < 0.52) would keep two.
  TargetDistribution(logits, {.temperature = 1.0f, .top_p = 0.52f, .min_p = 0.2f}, &probs);
  EXPECT_NEAR(probs[0], 1.0, 1e-9);
  TargetDistribution(logits, {.temperature = 1.0f, .top_p = 0.52f}, &probs);
  EXPECT_GT(probs[1], 0.0);
  // min_p 1 keeps the likeliest alone.
  TargetDistribution(logits, {.temperature = 1.0f, .min_p = 1.0f}, &probs);
  EXPECT_EQ(probs[0], 1.0);
}

TEST(SamplingTest, SampleIndexInvertsTheCdf) {
  const std::vector<double> probs = {0.25, 0.0, 0.5, 0.25};
  EXPECT_EQ(SampleIndex(probs, 0.0), 0);
  EXPECT_EQ(SampleIndex(probs, 0.2499), 0);
  EXPECT_EQ(SampleIndex(probs, 0.25), 2);
  EXPECT_EQ(SampleIndex(probs, 0.7499), 2);
  EXPECT_EQ(SampleIndex(probs, 0.75), 3);
  EXPECT_EQ(SampleIndex(probs, 0.9999999), 3);
}

TEST(SamplingTest, RequestRngIsSeededAndUniform) {
  RequestRng a(42), b(42), c(43);
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = a.Uniform();
    EXPECT_EQ(u, b.Uniform());
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
  EXPECT_NE(RequestRng(42).Uniform(), c.Uniform());
}

// A row with a NaN or infinite logit defines no distribution: an error naming the token, never
// an abort, whatever the temperature and filters.
TEST(SamplingTest, NonFiniteLogitsAreAnErrorNamingTheToken) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::pair<std::vector<float>, std::string>> rows = {
      {{nan, nan, nan, nan}, "token 0 is NaN"},
      {{1.0f, 2.0f, nan, 0.0f}, "token 2 is NaN"},
      {{1.0f, inf, 0.5f, 0.0f}, "token 1 is +infinity"},
      {{-inf, -inf, -inf, -inf}, "token 0 is -infinity"},
  };
  for (const SamplingParams& params :
       {SamplingParams{.temperature = 1.0f}, SamplingParams{.temperature = 0.7f, .top_k = 2},
        SamplingParams{.temperature = 1.3f, .top_p = 0.5f}}) {
    for (const auto& [logits, what] : rows) {
      std::vector<double> probs;
      const Status s = MakeTargetDistribution(logits, params, &probs);
      ASSERT_FALSE(s.ok());
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
    }
  }
  std::vector<double> probs;
  const std::vector<float> empty;
  EXPECT_FALSE(MakeTargetDistribution(empty, {.temperature = 1.0f}, &probs).ok());
}

TEST(SamplingTest, FiniteExtremeLogitsStillMakeADistribution) {
  const float big = std::numeric_limits<float>::max();
  const std::vector<float> logits = {big, -big, 0.0f, big};
  std::vector<double> probs;
  ASSERT_TRUE(MakeTargetDistribution(logits, {.temperature = 1e-6f}, &probs).ok());
  EXPECT_NEAR(probs[0], 0.5, 1e-12);
  EXPECT_NEAR(probs[3], 0.5, 1e-12);
  EXPECT_EQ(probs[1], 0.0);
}

TEST(SamplingTest, GreedyChoiceMustBeFinite) {
  const std::vector<float> logits = {std::numeric_limits<float>::quiet_NaN(), 1.0f,
                                     std::numeric_limits<float>::infinity()};
  EXPECT_FALSE(CheckGreedyChoice(logits, 0).ok());
  EXPECT_TRUE(CheckGreedyChoice(logits, 1).ok());
  EXPECT_NE(CheckGreedyChoice(logits, 2).message().find("token 2 is +infinity"), std::string::npos);
}

}  // namespace
}  // namespace dscale
