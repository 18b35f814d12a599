#pragma once
// Seeded sampling's randomness, indexed by position: the token a request emits at absolute
// position p is drawn with the uniform U(seed, p), a pure function of the request's seed and
// p. No stream is consumed, so what a request samples at p does not depend on how many rows
// earlier steps verified, how many uniforms their tests used, or which other requests shared
// the steps: a verify budget that follows timings cannot change a seeded request's output.
//
// U(seed, p) = top 53 bits of Mix(Mix(seed) + p) · 2⁻⁵³, Mix being SplitMix64's finaliser (a
// bijection on 64 bits), so positions of one seed never collide.

#include <cstdint>

namespace dscale {

inline uint64_t PositionMix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) for the token at absolute position `position` (≥ 0) of a request seeded
// with `seed`.
inline double PositionUniform(uint64_t seed, int64_t position) {
  const uint64_t h = PositionMix(PositionMix(seed) + static_cast<uint64_t>(position));
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

}  // namespace dscale
