// Parity of the CUDA DVL features and predictor MLP with the CPU reference (dvl/features.h,
// dvl/predictor.h) at odd sizes. Every test skips where no CUDA device is usable.
//
// Tolerances, element by element (u = 2⁻²⁴, γ_m = m·u / (1 − m·u), the classical bound on m
// chained float roundings):
// - top logit and the 15 gaps: the same bits. Both sides select the row's 16 largest values
//   exactly and form each gap with one subtraction.
// - log p_top = −log z and entropy = log z − s/z, z = Σ e^(x−max), s = Σ e^(x−max)·(x−max).
//   Both sides form x − max identically. The device takes CUDA's expf (within 2 ulp) and sums
//   in double; the CPU takes its vectorised exponential (within 1 ulp) and sums float lanes of
//   at most 32 terms per block, plus at most 7 lane additions, before folding into double. The
//   terms of z (and of s) share a sign, so z and s differ by at most 3 ulp + γ_41 ≈ 2.8e-6
//   relatively; log z then by as much, s/z by twice that, and −s/z ≤ entropy. With the final
//   rounding to float: |Δ log p| ≤ 1e-5·(1 + |log p|) and |Δ entropy| ≤ 2e-5·(1 + entropy) hold
//   with a margin of about 3.
// - projections, two checks:
//   * against an exact centred product in double: the device subtracts its centre (the row
//     mean, summed in double, rounded to float: off by ≤ u·|mean|) from each value, accumulates
//     512-row chunks in float with fused multiply-adds and adds the chunks in double, so it is
//     within γ_514·Σ_r|(x_r − mean)·p_r| + u·|mean|·|Σ_r p_r| + u·|result| of exact. This is
//     rigorous and tight enough that any indexing, chunking or centring mistake fails it.
//   * against the CPU: the CPU forms x·P uncentred in one float BLAS product over all r, then
//     subtracts mean·(1ᵀP) in double, with the mean summed in eight float lanes (within
//     γ_{⌈V/8⌉+2}·Σ|x|/V). A length-K float product's worst-case error γ_K·Σ|terms| says
//     nothing useful at K = 151936, so for the BLAS product the bound is the probabilistic one,
//     8·√K·u·Σ_r|x_r·p_r| (rounding errors as independent variables; Higham and Mary 2019),
//     which in practice holds by orders of magnitude; the tolerance is the device's bound plus
//     the CPU's.
//   The inputs have mean −2, so a missing centring is an error of order one.
// - batch context: the same bits.
// - MLP, from the same features: the normalisation is one correctly rounded subtraction and
//   division on both sides, so x̂ is the same bits. Each pre-activation is a length-1736 float
//   dot product (within γ_1736 of exact on each side), ReLU is 1-Lipschitz, and each output is
//   a length-65 dot product of the hidden vector; the bound adds both effects in double.

#include "device_dvl/dvl_features.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/dvl_shapes.h"
#include "cuda/cuda_test_util.h"
#include "cuda/dvl_test_util.h"
#include "device_dvl/dvl_predictor.h"
#include "dvl/features.h"
#include "dvl/predictor.h"
#include "kernels/kernel_test_util.h"

namespace dscale {
namespace {

using dvl::kBatchContextDim;
using dvl::kBatchContextOffset;
using dvl::kConfidencePerPosition;
using dvl::kDraftPositions;
using dvl::kFeatureCount;
using dvl::kHiddenProjDim;
using dvl::kHiddenProjOffset;
using dvl::kLogitProjDim;
using dvl::kLogitProjOffset;
using dvl::kPredictorHidden;
using dvl::kTopRanks;
using testing::CudaTest;
using testing::DevicePredictor;
using testing::DeviceStep;
using testing::Gamma;
using testing::kUnitRoundoff;
using testing::PoisonedBuffer;
using testing::RandomNormal;
using testing::RandomNormalisedPredictor;

constexpr int64_t kChunkRows = 512;  // the CPU's projection block (features.cc)
constexpr int kMaxReportedFailures = 10;

struct FeatureCase {
  int64_t n;
  int64_t hidden;
  int64_t vocab;
};

std::vector<FeatureCase> FeatureCases() {
  std::vector<FeatureCase> cases;
  for (const int64_t n : {1, 3, 7, 19, 33}) {
    for (const int64_t hidden : {24, 256}) {
      for (const int64_t vocab : {17, 300, 4160}) cases.push_back({n, hidden, vocab});
    }
  }
  // Qwen3's vocabulary: 297 projection chunks and ~600 values per thread in the top-16 pass.
  cases.push_back({3, 256, 151936});
  return cases;
}

// Draft logits for `rows` rows with mean −2 (so that centring matters), and repeated values at
// the top of every other row: a three-way tie for the maximum and a triple inside the top 16.
std::vector<float> DraftLogits(std::mt19937& rng, int64_t rows, int64_t vocab) {
  std::vector<float> logits = RandomNormal(rng, rows * vocab, -2.0f, 3.0f);
  for (int64_t row = 0; row < rows; row += 2) {
    float* r = logits.data() + row * vocab;
    r[0] = r[vocab / 2] = r[vocab - 1] = 14.0f;
    if (vocab >= 20) r[3] = r[7] = r[11] = 12.5f;
  }
  return logits;
}

// Collects failures of one comparison, reporting the first few in full.
class FailureLog {
 public:
  // Records whether |device − reference| ≤ bound (false for NaN), describing the element on
  // failure.
  template <typename Describe>
  void Check(double device, double reference, double bound, Describe describe) {
    const double diff = std::fabs(device - reference);
    if (diff <= bound) return;
    if (++failures_ <= kMaxReportedFailures) {
      ADD_FAILURE() << describe() << ": device " << device << ", reference " << reference
                    << ", |diff| " << diff << " > bound " << bound;
    }
  }
  int failures() const { return failures_; }

 private:
  int failures_ = 0;
};

// The exact centred product of one projected feature and the two bounds of the file comment.
struct ProjectionCheck {
  double exact = 0.0;       // Σ_r (x_r − centre)·p_r in double
  double device_bound = 0;  // |device − exact|
  double cpu_bound = 0;     // |cpu − exact|
};

// x [inner] one row, p [inner, cols], column `col`; `centre` the row's exact mean (0 for the
// hidden projection) and `cpu_centre_error` a bound on the CPU's error in it.
ProjectionCheck CheckProjection(const float* x, int64_t inner, const float* p, int cols, int col,
                                double centre, double cpu_centre_error) {
  ProjectionCheck check;
  double centred_mass = 0.0;
  double raw_mass = 0.0;
  double column_sum = 0.0;
  for (int64_t r = 0; r < inner; ++r) {
    const double pr = p[r * cols + col];
    check.exact += (x[r] - centre) * pr;
    centred_mass += std::fabs((x[r] - centre) * pr);
    raw_mass += std::fabs(x[r] * pr);
    column_sum += pr;
  }
  // The final rounding to float, plus slack for the double arithmetic on both sides and here.
  const double rounding =
      kUnitRoundoff * std::fabs(check.exact) + 1e-12 * (centred_mass + raw_mass) + 1e-30;
  check.device_bound = Gamma(kChunkRows + 2) * centred_mass +
                       kUnitRoundoff * std::fabs(centre) * std::fabs(column_sum) + rounding;
  check.cpu_bound = 8.0 * std::sqrt(static_cast<double>(inner)) * kUnitRoundoff * raw_mass +
                    cpu_centre_error * std::fabs(column_sum) + rounding;
  return check;
}

// The exact mean of one logit row, and a bound on the CPU's error in it (eight float lanes).
double RowMean(const float* row, int64_t vocab, double* cpu_error) {
  double sum = 0.0;
  double abs_sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v) {
    sum += row[v];
    abs_sum += std::fabs(row[v]);
  }
  const double lane_length = static_cast<double>((vocab + 7) / 8);
  *cpu_error = Gamma(lane_length + 2) * abs_sum / static_cast<double>(vocab) + 1e-12;
  return sum / static_cast<double>(vocab);
}

// Checks one projected feature both ways (file comment).
void CheckProjectedFeature(double gpu, double cpu, const ProjectionCheck& check, FailureLog& log,
                           const std::string& what) {
  log.Check(gpu, check.exact, check.device_bound, [&] { return what + " vs exact"; });
  log.Check(gpu, cpu, check.device_bound + check.cpu_bound, [&] { return what + " vs cpu"; });
}

void CompareRequestFeatures(const float* gpu, const float* cpu, const float* logits,
                            const float* hidden, const dvl::Projections& proj, FailureLog& log) {
  const int64_t vocab = proj.vocab_size;
  const int64_t hidden_size = proj.hidden_size;
  for (int j = 0; j < kDraftPositions; ++j) {
    const float* logit_row = logits + j * vocab;
    const float* hidden_row = hidden + j * hidden_size;
    const int base = j * kConfidencePerPosition;
    for (int r = 0; r < kTopRanks; ++r) {
      log.Check(gpu[base + r], cpu[base + r], 0.0, [&] {
        return "position " + std::to_string(j) + " rank slot " + std::to_string(r);
      });
    }
    const double log_p = cpu[base + kTopRanks];
    const double entropy = cpu[base + kTopRanks + 1];
    log.Check(gpu[base + kTopRanks], log_p, 1e-5 * (1.0 + std::fabs(log_p)),
              [&] { return "position " + std::to_string(j) + " log p_top"; });
    log.Check(gpu[base + kTopRanks + 1], entropy, 2e-5 * (1.0 + std::fabs(entropy)),
              [&] { return "position " + std::to_string(j) + " entropy"; });

    for (int c = 0; c < kHiddenProjDim; ++c) {
      const int index = kHiddenProjOffset + j * kHiddenProjDim + c;
      const ProjectionCheck check =
          CheckProjection(hidden_row, hidden_size, proj.hidden.data(), kHiddenProjDim, c, 0.0, 0.0);
      CheckProjectedFeature(
          gpu[index], cpu[index], check, log,
          "position " + std::to_string(j) + " hidden projection " + std::to_string(c));
    }
    double cpu_centre_error = 0.0;
    const double mean = RowMean(logit_row, vocab, &cpu_centre_error);
    for (int c = 0; c < kLogitProjDim; ++c) {
      const int index = kLogitProjOffset + j * kLogitProjDim + c;
      const ProjectionCheck check = CheckProjection(logit_row, vocab, proj.logit.data(),
                                                    kLogitProjDim, c, mean, cpu_centre_error);
      CheckProjectedFeature(
          gpu[index], cpu[index], check, log,
          "position " + std::to_string(j) + " logit projection " + std::to_string(c));
    }
  }
  for (int t = 0; t < kBatchContextDim; ++t) {
    const int index = kBatchContextOffset + t;
    log.Check(gpu[index], cpu[index], 0.0, [&] { return "batch context " + std::to_string(t); });
  }
}

class CudaDvlFeaturesTest : public CudaTest {};

// The launch covers two requests past the live ones (as in a bucket); their rows must be left
// untouched.
TEST_F(CudaDvlFeaturesTest, MatchesCpuAtOddSizes) {
  constexpr int64_t kExtraRequests = 2;
  std::mt19937 rng(301);
  for (const FeatureCase& fc : FeatureCases()) {
    SCOPED_TRACE(::testing::Message() << "n=" << fc.n << " H=" << fc.hidden << " V=" << fc.vocab);
    const int64_t requests = fc.n + kExtraRequests;
    const std::vector<float> logits = DraftLogits(rng, requests * kDraftPositions, fc.vocab);
    const std::vector<float> hidden =
        RandomNormal(rng, requests * kDraftPositions * fc.hidden, 0.0f, 1.0f);
    const dvl::Projections proj = dvl::MakeProjections(fc.hidden, fc.vocab, 40 + fc.n);

    std::vector<float> expected(fc.n * kFeatureCount);
    dvl::ExtractFeaturesBatch(logits.data(), hidden.data(), fc.n, /*live_count=*/fc.n, proj,
                              expected.data());

    const dvl::Predictor holder(proj, dvl::PredictorWeights::Zeros());
    const DevicePredictor device_proj(holder);
    auto d_logits = ToDevice(logits);
    auto d_hidden = ToDevice(hidden);
    auto d_step = DeviceStep(static_cast<int32_t>(fc.n), static_cast<int32_t>(fc.n));
    cuda::DeviceBuffer<float> scratch(
        static_cast<size_t>(cuda::FeatureScratchFloats(requests, fc.hidden, fc.vocab)));
    auto d_features = PoisonedBuffer<float>(requests * kFeatureCount);
    cuda::ExtractFeaturesBatch(d_logits.data(), d_hidden.data(), requests,
                               device_proj.projections(), d_step.data(), scratch.data(),
                               d_features.data(), stream_);
    const std::vector<float> got = ToHost(d_features);

    FailureLog log;
    for (int64_t i = 0; i < fc.n; ++i) {
      SCOPED_TRACE(::testing::Message() << "request " << i);
      CompareRequestFeatures(got.data() + i * kFeatureCount, expected.data() + i * kFeatureCount,
                             logits.data() + i * kDraftPositions * fc.vocab,
                             hidden.data() + i * kDraftPositions * fc.hidden, proj, log);
    }
    ASSERT_EQ(log.failures(), 0);
    EXPECT_TRUE(std::all_of(got.begin() + fc.n * kFeatureCount, got.end(), [](float v) {
      return std::isnan(v);
    })) << "features of requests past the live count were written";
  }
}

// |gpu − cpu| bounds for the 15 outputs of one request (file comment), from the normalised
// features x̂ (the same bits on both sides).
std::vector<double> MlpBounds(const dvl::PredictorWeights& w, const std::vector<float>& x_hat) {
  std::vector<double> hidden_error(kPredictorHidden), hidden_abs(kPredictorHidden);
  for (int h = 0; h < kPredictorHidden; ++h) {
    double exact = w.b1[h];
    double mass = std::fabs(w.b1[h]);
    for (int d = 0; d < kFeatureCount; ++d) {
      const double term = static_cast<double>(x_hat[d]) * w.w1[d * kPredictorHidden + h];
      exact += term;
      mass += std::fabs(term);
    }
    hidden_error[h] = 2.0 * Gamma(kFeatureCount + 1) * mass;
    hidden_abs[h] = std::max(exact, 0.0) + hidden_error[h];
  }
  std::vector<double> bounds(kDraftPositions);
  for (int o = 0; o < kDraftPositions; ++o) {
    double propagated = 0.0;
    double mass = std::fabs(w.b2[o]);
    for (int h = 0; h < kPredictorHidden; ++h) {
      const double weight = std::fabs(w.w2[h * kDraftPositions + o]);
      propagated += weight * hidden_error[h];
      mass += weight * hidden_abs[h];
    }
    bounds[o] = propagated + 2.0 * Gamma(kPredictorHidden + 1) * mass + 1e-30;
  }
  return bounds;
}

// Fed the same feature bytes, the device MLP matches Predictor::Forward within float rounding;
// requests past the live count are left untouched.
TEST_F(CudaDvlFeaturesTest, PredictorMatchesCpuOnTheSameFeatures) {
  constexpr int64_t kHidden = 24;
  constexpr int64_t kVocab = 300;
  constexpr int64_t kExtraRequests = 3;
  const dvl::Predictor predictor = RandomNormalisedPredictor(kHidden, kVocab, 7);
  const DevicePredictor device_predictor(predictor);
  const dvl::PredictorWeights& w = predictor.weights();
  std::mt19937 rng(302);
  for (const int64_t n : {1, 3, 7, 19, 33}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    const int64_t requests = n + kExtraRequests;
    const std::vector<float> logits = DraftLogits(rng, requests * kDraftPositions, kVocab);
    const std::vector<float> hidden =
        RandomNormal(rng, requests * kDraftPositions * kHidden, 0.0f, 1.0f);
    std::vector<float> features(requests * kFeatureCount);
    dvl::ExtractFeaturesBatch(logits.data(), hidden.data(), requests, /*live_count=*/n,
                              predictor.projections(), features.data());
    std::vector<float> expected(n * kDraftPositions);
    predictor.Forward(features.data(), n, expected.data());

    auto d_features = ToDevice(features);
    auto d_step = DeviceStep(static_cast<int32_t>(n), static_cast<int32_t>(n));
    auto d_logits = PoisonedBuffer<float>(requests * kDraftPositions);
    cuda::PredictorForward(d_features.data(), requests, device_predictor.weights(), d_step.data(),
                           d_logits.data(), stream_);
    const std::vector<float> got = ToHost(d_logits);

    FailureLog log;
    std::vector<float> x_hat(kFeatureCount);
    for (int64_t i = 0; i < n; ++i) {
      for (int d = 0; d < kFeatureCount; ++d) {
        x_hat[d] = (features[i * kFeatureCount + d] - w.feature_mean[d]) / w.feature_std[d];
      }
      const std::vector<double> bounds = MlpBounds(w, x_hat);
      for (int o = 0; o < kDraftPositions; ++o) {
        const int64_t index = i * kDraftPositions + o;
        log.Check(got[index], expected[index], bounds[o],
                  [&] { return "request " + std::to_string(i) + " output " + std::to_string(o); });
      }
    }
    ASSERT_EQ(log.failures(), 0);
    for (int64_t index = n * kDraftPositions; index < requests * kDraftPositions; ++index) {
      EXPECT_TRUE(std::isnan(got[index])) << "logit " << index << " past the live count written";
    }
  }
}

}  // namespace
}  // namespace dscale
