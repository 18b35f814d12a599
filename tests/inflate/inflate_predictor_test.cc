// The inflated DVL predictor sees the small pair's features: the same confidence values, the
// hidden projection through the hidden map, and the logit projection unmoved by pad logits of any
// size — each within the float bound of its sums (float_bounds.h).

#include "inflate/inflate_predictor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "../engine/engine_test_util.h"
#include "core/dvl_shapes.h"
#include "dvl/features.h"
#include "float_bounds.h"

namespace dscale {
namespace {

using dvl::kDraftPositions;
using testing::DotProductOrderBound;
using testing::FloatGamma;

InflatePlan TestPlan(bool tied) {
  DecoderConfig config = testing::OddTinyConfig();
  config.tie_word_embeddings = tied;
  InflateShape shape = ShapeOf(config);
  shape.hidden_size = 144;
  shape.head_dim = 64;
  shape.vocab_size = 4000;
  InflatePlan plan = PlanInflation(config, testing::TestDrafterConfig(config), shape).value();
  EXPECT_TRUE(SetPadRows({.target_final_gain = 1,
                          .drafter_final_gain = 1,
                          .logit_bound = 30,
                          .residual_rms_bound = 1e4},
                         &plan)
                  .ok());
  return plan;
}

TEST(InflatePredictorTest, ProjectionsFollowThePlan) {
  const InflatePlan plan = TestPlan(/*tied=*/true);
  const dvl::Predictor small = testing::RandomPredictor(72, 131, 4);
  const dvl::Predictor large = InflatePredictor(small, plan).value();
  const dvl::Projections& p = small.projections();
  const dvl::Projections& q = large.projections();
  ASSERT_EQ(q.hidden_size, 144);
  ASSERT_EQ(q.vocab_size, 4000);
  for (int64_t i = 0; i < 144; ++i) {
    for (int k = 0; k < dvl::kHiddenProjDim; ++k) {
      const float want =
          i < 72 ? plan.residual_scale * p.hidden[i * dvl::kHiddenProjDim + k] : 0.0f;
      ASSERT_EQ(q.hidden[i * dvl::kHiddenProjDim + k], want) << i << " " << k;
    }
  }
  for (int k = 0; k < dvl::kLogitProjDim; ++k) {
    EXPECT_EQ(q.logit_column_sum[k], 0.0) << "column " << k << " sums to exactly zero";
    double mean = 0.0;
    for (int64_t v = 0; v < 131; ++v) mean += p.logit[v * dvl::kLogitProjDim + k];
    mean /= 131;
    for (int64_t v = 0; v < 131; ++v) {
      // Within 1.5 grid steps of the centred value; the grid step is below 2^-23 of the column's
      // largest value.
      const double want = p.logit[v * dvl::kLogitProjDim + k] - mean;
      EXPECT_NEAR(q.logit[v * dvl::kLogitProjDim + k], want, 0x1p-21) << v << " " << k;
    }
    for (int64_t v = 131; v < 4000; ++v) ASSERT_EQ(q.logit[v * dvl::kLogitProjDim + k], 0.0f);
  }
  EXPECT_EQ(large.weights().w1, small.weights().w1);
}

// Features of one request: small logits/hidden rows against the inflated ones (pad logits near
// −10^7, hidden rows divided by λ when tied, with the constants' normed values present).
TEST(InflatePredictorTest, FeaturesMatchTheSmallPair) {
  for (const bool tied : {false, true}) {
    const InflatePlan plan = TestPlan(tied);
    const dvl::Predictor small = testing::RandomPredictor(72, 131, 4);
    const dvl::Predictor large = InflatePredictor(small, plan).value();
    std::mt19937 rng(9);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    const int64_t v = 131, big_v = 4000, d = 72, big_d = 144;
    std::vector<float> logits(kDraftPositions * v), big_logits(kDraftPositions * big_v);
    std::vector<float> hidden(kDraftPositions * d), big_hidden(kDraftPositions * big_d, 0.0f);
    const float scale = tied ? plan.residual_scale : 1.0f;
    for (int j = 0; j < kDraftPositions; ++j) {
      for (int64_t t = 0; t < big_v; ++t) {
        big_logits[j * big_v + t] = t < v ? (logits[j * v + t] = normal(rng)) : -1.3e7f - 1e5f * j;
      }
      for (int64_t i = 0; i < d; ++i)
        big_hidden[j * big_d + i] = (hidden[j * d + i] = normal(rng)) / scale;
      big_hidden[j * big_d + plan.constant_dims[0]] = 0.02f;
      big_hidden[j * big_d + plan.constant_dims[1]] = -0.02f;
    }
    std::vector<float> a(dvl::kFeatureCount), b(dvl::kFeatureCount);
    dvl::ExtractFeatures(logits.data(), hidden.data(), 3, small.projections(), a.data());
    dvl::ExtractFeatures(big_logits.data(), big_hidden.data(), 3, large.projections(), b.data());

    const dvl::Projections& p = small.projections();
    const dvl::Projections& q = large.projections();
    const double u = testing::kFloatUnitRoundoff;
    for (int j = 0; j < kDraftPositions; ++j) {
      const float* x = logits.data() + j * v;
      const float* conf_a = a.data() + dvl::kConfidenceOffset + j * dvl::kConfidencePerPosition;
      const float* conf_b = b.data() + dvl::kConfidenceOffset + j * dvl::kConfidencePerPosition;
      for (int r = 0; r < dvl::kTopRanks; ++r) EXPECT_EQ(conf_a[r], conf_b[r]) << "top ranks";
      // log p_top and the entropy come from Σe^(x−max) and Σe^(x−max)(x−max) over the row: float
      // sums in other lane orders (γ_V' each) of exponentials that may come from the scalar or
      // the vector exp (2^-22 apart): relative error 2ρ on each sum, ρ = γ_V' + 2^-22.
      const double rho = FloatGamma(big_v) + 0x1p-22;
      double z = 0, s = 0;
      for (int64_t t = 0; t < v; ++t) {
        z += std::exp(double{x[t]} - conf_a[0]);
        s += std::exp(double{x[t]} - conf_a[0]) * (x[t] - conf_a[0]);
      }
      EXPECT_NEAR(conf_a[16], conf_b[16], 4 * rho + 4 * u * std::fabs(std::log(z)));
      EXPECT_NEAR(conf_a[17], conf_b[17],
                  4 * rho * (1 + 2 * std::fabs(s / z)) + 4 * u * std::fabs(std::log(z) - s / z));

      for (int k = 0; k < dvl::kHiddenProjDim; ++k) {
        double mass = 0;
        for (int64_t i = 0; i < d; ++i)
          mass += std::fabs(hidden[j * d + i] * p.hidden[i * dvl::kHiddenProjDim + k]);
        const int at = dvl::kHiddenProjOffset + j * dvl::kHiddenProjDim + k;
        EXPECT_NEAR(a[at], b[at], DotProductOrderBound(big_d, mass) + 2 * u * std::fabs(a[at]));
      }
      for (int k = 0; k < dvl::kLogitProjDim; ++k) {
        double mass = 0, mass_large = 0, abs_x = 0;
        for (int64_t t = 0; t < v; ++t) {
          mass += std::fabs(x[t] * p.logit[t * dvl::kLogitProjDim + k]);
          mass_large += std::fabs(x[t] * q.logit[t * dvl::kLogitProjDim + k]);
          abs_x += std::fabs(x[t]);
        }
        // Each side within γ·mass of Σ x·(P − mean P); the large side's grid moves each P by at
        // most 1.5 steps (< 2^-21 here, ProjectionsFollowThePlan).
        const double bound =
            DotProductOrderBound(big_v, mass + mass_large) + 0x1p-21 * abs_x +
            4 * u * std::fabs(a[dvl::kLogitProjOffset + j * dvl::kLogitProjDim + k]);
        const int at = dvl::kLogitProjOffset + j * dvl::kLogitProjDim + k;
        EXPECT_NEAR(a[at], b[at], bound) << "position " << j << " column " << k;
      }
    }
    for (int i = dvl::kBatchContextOffset; i < dvl::kFeatureCount; ++i) EXPECT_EQ(a[i], b[i]);
  }
}

}  // namespace
}  // namespace dscale
