#pragma once
// Shared helpers for the kernel parity tests: seeded random inputs and error measures.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace dscale::testing {

// n values drawn from N(mean, stddev²) with the caller's generator (seeded per test, so every
// run sees the same inputs).
inline std::vector<float> RandomNormal(std::mt19937& rng, size_t n, float mean = 0.0f,
                                       float stddev = 1.0f) {
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Largest |a[i] − b[i]|; NaN anywhere makes the result NaN, which fails every ≤ comparison.
inline double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = a.size() == b.size() ? 0.0 : NAN;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    worst = std::isnan(d) ? d : std::max(worst, d);
  }
  return worst;
}

// Largest |a[i] − b[i]| − rel·|b[i]|: ≤ abs_tol exactly when every element meets
// |a − b| ≤ rel·|b| + abs_tol (b is the reference).
inline double MaxExcessOverRelative(const std::vector<float>& a, const std::vector<float>& b,
                                    double rel) {
  double worst = a.size() == b.size() ? -INFINITY : NAN;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]) - rel * std::fabs(b[i]);
    worst = std::isnan(d) ? d : std::max(worst, d);
  }
  return worst;
}

// Tolerances shared by the CPU-vs-reference and CUDA-vs-CPU dense kernel tests.
// Linear: a float dot product of n terms is within n·ε·Σ|x_i·w_i| of the exact value (the
// classical worst-case bound), ε the float machine epsilon; anything outside is a wrong
// product (or a wrong transpose, or TF32 math), not rounding.
inline constexpr double kFloatEps = std::numeric_limits<float>::epsilon();
// Norms, RoPE and SwiGLU do O(1) float operations per output after an accurate reduction, so
// they agree to 1e-5 relative (plus a tiny floor for values near 0).
inline constexpr double kElementwiseRelTol = 1e-5;
inline constexpr double kElementwiseAbsTol = 1e-6;
// Softmax outputs are probabilities in [0, 1]; compared absolutely.
inline constexpr double kSoftmaxAbsTol = 1e-6;
inline constexpr float kRmsEps = 1e-6f;

// Sizes the parity tests sweep: odd, prime-ish, and one past typical vector widths.
inline constexpr int64_t kTestRows[] = {1, 3, 7, 19, 133};
inline constexpr int64_t kTestHeadDims[] = {32, 64, 128};

}  // namespace dscale::testing
