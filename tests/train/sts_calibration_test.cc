// Sequential temperature scaling: on traces whose true conditional survival is σ(l / T*), the fit
// finds T* at every position and the held-out ECE of cumulative survival falls; the ECE itself is
// checked on a hand-computed case; confidence trace files round-trip and refuse bad input.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "train/confidence_traces.h"
#include "train/sts_calibration.h"

namespace dscale::train {
namespace {

// `records` blocks of γ = 7: logits N(2, 1.5²) (an overconfident head), each draft surviving with
// probability σ(l / true_t) given the earlier ones did; prompt id = record / 10.
ConfidenceTraces OverconfidentTraces(int records, float true_t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> logit(2.0f, 1.5f);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  ConfidenceTraces traces{.positions = 7};
  std::vector<float> l(7);
  for (int r = 0; r < records; ++r) {
    uint32_t accepted = 0;
    bool alive = true;
    for (int k = 0; k < 7; ++k) {
      l[k] = logit(rng);
      alive = alive && unit(rng) < 1.0 / (1.0 + std::exp(-l[k] / true_t));
      accepted += alive ? 1 : 0;
    }
    EXPECT_TRUE(traces.Append(static_cast<uint32_t>(r / 10), 0, accepted, l.data()).ok());
  }
  return traces;
}

TEST(StsCalibration, FindsTheTrueTemperatureAndLowersHeldOutEce) {
  const ConfidenceTraces traces = OverconfidentTraces(40000, 2.5f, 5);
  const TraceSplit split = SplitByPrompt(traces, 5);
  ASSERT_GT(split.held_out.size(), 7000u);
  Result<budget::ConfidenceCalibration> fitted = FitSequentialTemperatures(traces, split.fit);
  ASSERT_TRUE(fitted.ok()) << fitted.status().ToString();
  ASSERT_EQ(fitted->temperatures.size(), 7u);
  // Later positions see fewer survivors, so their fit is looser.
  for (int k = 0; k < 7; ++k) EXPECT_NEAR(fitted->temperatures[k], 2.5, k < 3 ? 0.3 : 0.8) << k;
  const double before = MeanEce(CumulativeSurvivalEce(traces, split.held_out, {}));
  const double after = MeanEce(CumulativeSurvivalEce(traces, split.held_out, *fitted));
  EXPECT_GT(before, 0.05);
  EXPECT_LT(after, 0.02);
}

TEST(StsCalibration, EceOfAHandComputedCase) {
  // γ = 1, logits 0 (p = 0.5): two records accepted, two not → ECE 0 at T = 1.
  ConfidenceTraces traces{.positions = 1};
  const float zero = 0.0f, big = 4.0f;
  for (uint32_t y : {1u, 1u, 0u, 0u}) ASSERT_TRUE(traces.Append(0, 0, y, &zero).ok());
  EXPECT_NEAR(CumulativeSurvivalEce(traces, {}, {})[0], 0.0, 1e-12);
  // A fifth record predicted σ(4) ≈ 0.982 and rejected: its own bin's error is 0.982, weighed 1/5.
  ASSERT_TRUE(traces.Append(1, 0, 0, &big).ok());
  EXPECT_NEAR(CumulativeSurvivalEce(traces, {}, {})[0], (1.0 / (1.0 + std::exp(-4.0))) / 5, 1e-9);
}

TEST(StsCalibration, FitRefusesNoRecords) {
  const ConfidenceTraces traces = OverconfidentTraces(10, 1.0f, 1);
  EXPECT_FALSE(FitSequentialTemperatures(traces, {}).ok());
}

TEST(ConfidenceTraces, RoundTripsAndRefusesBadInput) {
  const ConfidenceTraces traces = OverconfidentTraces(50, 1.0f, 2);
  const std::string path = ::testing::TempDir() + "/confidence_roundtrip.bin";
  ASSERT_TRUE(WriteConfidenceTraces(traces, path).ok());
  Result<ConfidenceTraces> read = ReadConfidenceTraces({path, path});
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->size(), 100u);
  EXPECT_EQ(read->positions, 7);
  for (size_t r = 0; r < 50; ++r) {
    EXPECT_EQ(read->accepted[r + 50], traces.accepted[r]);
    EXPECT_EQ(read->prompt_ids[r], traces.prompt_ids[r]);
    for (int k = 0; k < 7; ++k) EXPECT_EQ(read->logits_of(r)[k], traces.logits_of(r)[k]);
  }
  ConfidenceTraces bad{.positions = 2};
  const float logits[2] = {1.0f, NAN};
  EXPECT_FALSE(bad.Append(0, 0, 3, logits).ok());  // y > γ
  EXPECT_FALSE(bad.Append(0, 0, 1, logits).ok());  // non-finite
  // A truncated record is named.
  std::FILE* f = std::fopen(path.c_str(), "ab");
  ASSERT_NE(f, nullptr);
  std::fputc(0, f);
  std::fclose(f);
  Result<ConfidenceTraces> truncated = ReadConfidenceTraces({path});
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("record 50 is truncated"), std::string::npos)
      << truncated.status().message();
}

}  // namespace
}  // namespace dscale::train
