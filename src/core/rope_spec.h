#pragma once
// Rotary embedding frequencies: θ and an optional scaling of them (Llama 3's "llama3"
// rope_scaling). One definition shared by the config readers, the CPU, reference and CUDA
// kernels, so every backend rotates by the same angles.

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define DSCALE_HOST_DEVICE __host__ __device__
#else
#define DSCALE_HOST_DEVICE
#endif

namespace dscale {

enum class RopeScalingType : int32_t {
  kNone,    // inv_freq_i = θ^(−2i/head_dim)
  kLlama3,  // long wavelengths divided by `factor`, a smooth ramp between (Llama 3.1+)
};

// config.json's `rope_scaling`; the fields past `type` are read for kLlama3 only.
struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;

  bool operator==(const RopeScaling&) const = default;
};

struct RopeSpec {
  double theta = 1e6;
  RopeScaling scaling;
  // Partial rotary embedding (Qwen3.5's partial_rotary_factor): only the first rotary_dim dims
  // of each head are rotated (rotate-half within them, frequencies over rotary_dim), the rest
  // pass through. 0: the whole head. The CPU kernels read it; the device refuses such models.
  int64_t rotary_dim = 0;

  bool operator==(const RopeSpec&) const = default;
};

// The angle per position of rotation pair i (0 ≤ i < head_dim/2), in double. Unscaled it is
// θ^(−2i/head_dim) exactly as the kernels always formed it. llama3: with wavelength
// λ = 2π/inv_freq and L = original_max_position_embeddings, λ > L/low_freq_factor divides by
// `factor`, λ < L/high_freq_factor keeps inv_freq, and between them
// s = (L/λ − low)/(high − low) mixes (1 − s)·inv_freq/factor + s·inv_freq.
DSCALE_HOST_DEVICE inline double RopeInvFreq(const RopeSpec& rope, int64_t i, int64_t head_dim) {
  const double exponent = -2.0 * static_cast<double>(i) / static_cast<double>(head_dim);
#if defined(__CUDA_ARCH__)
  const double inv_freq = ::pow(rope.theta, exponent);
#else
  const double inv_freq = std::pow(rope.theta, exponent);
#endif
  if (rope.scaling.type != RopeScalingType::kLlama3) return inv_freq;
  const RopeScaling& s = rope.scaling;
  const double context = static_cast<double>(s.original_max_position_embeddings);
  const double wavelength = 2.0 * 3.14159265358979323846 / inv_freq;
  if (wavelength > context / s.low_freq_factor) return inv_freq / s.factor;
  if (wavelength < context / s.high_freq_factor) return inv_freq;
  const double smooth =
      (context / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return (1.0 - smooth) * inv_freq / s.factor + smooth * inv_freq;
}

}  // namespace dscale
