#pragma once
// A small, fully specified random generator so that projection matrices, weight
// initialisation and data shuffles are identical on every platform and standard library
// (std::normal_distribution and friends are implementation-defined).
//
// SplitMix64 (Steele, Lea and Flood): state += 0x9E3779B97F4A7C15, then two xor-shift-
// multiply rounds. Uniform doubles take the top 53 bits. Normals use the Box–Muller
// transform on two uniforms and return both values of each pair in turn (cosine first).

#include <cmath>
#include <cstdint>
#include <numbers>

namespace dscale::dvl {

// One SplitMix64 output for `x` (stateless mix; also used to hash ids with a seed).
inline uint64_t SplitMix64Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

class DeterministicRandom {
 public:
  explicit DeterministicRandom(uint64_t seed) : state_(seed) {}

  uint64_t NextU64() {
    const uint64_t out = SplitMix64Mix(state_);
    state_ += 0x9E3779B97F4A7C15ULL;
    return out;
  }

  // Uniform in [0, 1).
  double NextUniform() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n) for n ≥ 1 (multiply-shift; the bias is below 2^-32 for the
  // sizes used here).
  uint64_t NextBelow(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(NextU64()) * n) >> 64);
  }

  // Standard normal by Box–Muller.
  double NextNormal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = static_cast<double>((NextU64() >> 11) + 1) * 0x1.0p-53;  // (0, 1]
    const double u2 = NextUniform();                                           // [0, 1)
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * std::numbers::pi * u2;
    spare_ = radius * std::sin(angle);
    has_spare_ = true;
    return radius * std::cos(angle);
  }

 private:
  uint64_t state_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace dscale::dvl
