#include "spec/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

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

}  // namespace
}  // namespace dscale
