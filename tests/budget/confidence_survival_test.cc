// Survival from a confidence head: running products of σ(l / T), and the calibration file's
// round trip and refusals.

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include "budget/confidence_survival.h"

namespace dscale::budget {
namespace {

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(ConfidenceSurvival, RunningProductOfScaledSigmoids) {
  const float logits[6] = {2.0f, 0.0f, -1.0f, 1.0f, 3.0f, -40.0f};  // two requests, γ = 3
  float q[8];
  SurvivalFromConfidence(logits, 2, 3, {}, q);
  EXPECT_EQ(q[0], 1.0f);
  EXPECT_FLOAT_EQ(q[1], Sigmoid(2.0));
  EXPECT_FLOAT_EQ(q[2], Sigmoid(2.0) * 0.5);
  EXPECT_FLOAT_EQ(q[3], Sigmoid(2.0) * 0.5 * Sigmoid(-1.0));
  EXPECT_EQ(q[4], 1.0f);
  EXPECT_FLOAT_EQ(q[7], Sigmoid(1.0) * Sigmoid(3.0) * Sigmoid(-40.0));
  const ConfidenceCalibration calibration{.temperatures = {2.0f, 1.0f, 0.5f}};
  SurvivalFromConfidence(logits, 2, 3, calibration, q);
  EXPECT_FLOAT_EQ(q[1], Sigmoid(1.0));
  EXPECT_FLOAT_EQ(q[3], Sigmoid(1.0) * 0.5 * Sigmoid(-2.0));
}

TEST(ConfidenceSurvival, CalibrationFileRoundTripsAndRefusesBadFields) {
  const std::string path = ::testing::TempDir() + "/calibration.json";
  const ConfidenceCalibration written{
      .temperatures = {1.5f, 2.0f}, .records = 123, .ece_before = 0.07, .ece_after = 0.01};
  ASSERT_TRUE(SaveConfidenceCalibration(written, path).ok());
  Result<ConfidenceCalibration> read = LoadConfidenceCalibration(path, 2);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->temperatures, written.temperatures);
  EXPECT_EQ(read->records, 123);
  EXPECT_DOUBLE_EQ(read->ece_after, 0.01);
  // The drafter drafts 3 per block: the file's 2 temperatures do not fit it.
  Result<ConfidenceCalibration> wrong = LoadConfidenceCalibration(path, 3);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("\"temperatures\": expected 3 entries"), std::string::npos)
      << wrong.status().message();
  std::ofstream(path) << R"({"format": "dscale-confidence-calibration-v1", "temperatures": [1, 0]})";
  Result<ConfidenceCalibration> zero = LoadConfidenceCalibration(path, 2);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("temperatures[1]"), std::string::npos)
      << zero.status().message();
  std::ofstream(path) << R"({"temperatures": [1, 1]})";
  EXPECT_FALSE(LoadConfidenceCalibration(path, 2).ok());
  EXPECT_FALSE(SaveConfidenceCalibration({}, path).ok());
}

}  // namespace
}  // namespace dscale::budget
