#pragma once
// Shared pieces of the DVL CUDA parity tests: random predictors, their device copies, a device
// DvlStep, and the float error bounds the tolerances are built from.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/dvl_shapes.h"
#include "core/step_batch.h"
#include "dvl/features.h"
#include "dvl/predictor.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dvl_device.h"

namespace dscale::testing {

// Unit roundoff of f32 (half an ulp at 1).
inline constexpr double kUnitRoundoff = 0x1p-24;

// γ_m = m·u / (1 − m·u): the classical bound on the relative error of m chained float
// operations (Higham), e.g. a length-m dot product against Σ|terms|.
inline double Gamma(double m) { return m * kUnitRoundoff / (1.0 - m * kUnitRoundoff); }

// Draft blocks given as [n, width] rows (request i's row j at position positions[i·width] + j)
// as the StepBatch dvl::Pack reads: one span of `width` rows per request, sequence i, no page
// table (the packer never reads one).
inline StepBatch BlocksFromRows(int64_t n, int width, std::span<const int32_t> tokens,
                                std::span<const int32_t> positions,
                                std::span<const int32_t> kv_slots) {
  StepBatch blocks;
  for (int64_t i = 0; i < n; ++i) {
    const size_t first = static_cast<size_t>(i * width);
    blocks.BeginSpan(static_cast<int32_t>(i), positions[first], nullptr);
    for (int j = 0; j < width; ++j) {
      DSCALE_CHECK(positions[first + j] == positions[first] + j);
      blocks.AddRow(tokens[first + j], kv_slots[first + j], /*logits=*/false);
    }
  }
  return blocks;
}

// A predictor for drafter sizes (hidden, vocab) with the fixed projections of `seed` and random
// weights: feature statistics that give normalised features of order one, and an MLP whose
// pre-activations are too. The batch-context block keeps mean 0 and std 1, so its zeros stay
// exact zeros (the MLP's skip path).
inline dvl::Predictor RandomNormalisedPredictor(int64_t hidden, int64_t vocab, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> spread(0.5f, 3.0f);
  dvl::PredictorWeights w = dvl::PredictorWeights::Zeros();
  for (int d = 0; d < dvl::kBatchContextOffset; ++d) {
    w.feature_mean[d] = normal(rng);
    w.feature_std[d] = spread(rng);
  }
  const float w1_scale = 1.0f / std::sqrt(static_cast<float>(dvl::kFeatureCount));
  for (float& v : w.w1) v = normal(rng) * w1_scale;
  for (float& v : w.b1) v = normal(rng) * 0.1f;
  for (float& v : w.w2) v = normal(rng) * 0.125f;
  for (float& v : w.b2) v = normal(rng) * 0.1f;
  return dvl::Predictor(dvl::MakeProjections(hidden, vocab, seed), std::move(w));
}

// Device copies of a predictor's arrays, and the views the kernels take.
class DevicePredictor {
 public:
  explicit DevicePredictor(const dvl::Predictor& p)
      : hidden_size_(p.projections().hidden_size),
        vocab_size_(p.projections().vocab_size),
        hidden_(Upload(p.projections().hidden)),
        logit_(Upload(p.projections().logit)),
        mean_(Upload(p.weights().feature_mean)),
        std_(Upload(p.weights().feature_std)),
        w1_(Upload(p.weights().w1)),
        b1_(Upload(p.weights().b1)),
        w2_(Upload(p.weights().w2)),
        b2_(Upload(p.weights().b2)) {}

  cuda::DvlProjectionsView projections() const {
    return {.hidden_size = hidden_size_,
            .vocab_size = vocab_size_,
            .hidden = hidden_.data(),
            .logit = logit_.data()};
  }
  cuda::DvlPredictorView weights() const {
    return {.feature_mean = mean_.data(),
            .feature_std = std_.data(),
            .w1 = w1_.data(),
            .b1 = b1_.data(),
            .w2 = w2_.data(),
            .b2 = b2_.data()};
  }

 private:
  static cuda::DeviceBuffer<float> Upload(const std::vector<float>& host) {
    return cuda::DeviceBuffer<float>(host.data(), host.size());
  }

  int64_t hidden_size_;
  int64_t vocab_size_;
  cuda::DeviceBuffer<float> hidden_, logit_, mean_, std_, w1_, b1_, w2_, b2_;
};

// A DvlStep in device memory.
inline cuda::DeviceBuffer<cuda::DvlStep> DeviceStep(int32_t live_count, int32_t budget) {
  const cuda::DvlStep step{.live_count = live_count, .budget = budget};
  return cuda::DeviceBuffer<cuda::DvlStep>(&step, 1);
}

// A device buffer of `count` values whose bytes are all 0xff (NaN as f32, −1 as int32): a
// kernel that fails to write an element leaves a value no correct result has.
template <typename T>
cuda::DeviceBuffer<T> PoisonedBuffer(size_t count) {
  std::vector<T> host(count);
  std::memset(host.data(), 0xff, host.size() * sizeof(T));
  return cuda::DeviceBuffer<T>(host.data(), host.size());
}

// Whether two float vectors hold the same bits (NaN payloads included).
inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace dscale::testing
