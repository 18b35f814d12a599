#pragma once
// Seeded sampling's randomness, indexed by position: the token a request emits at absolute
// position p is drawn with the uniform U(seed, p), a pure function of the request's seed and
// p. No stream is consumed, so what a request samples at p does not depend on how many rows
// earlier steps verified, how many uniforms their tests used, or which other requests shared
// the steps: a verify budget that follows timings cannot change a seeded request's output.
//
// U(seed, p) = top 53 bits of Mix(Mix(seed) + p) · 2⁻⁵³, Mix being SplitMix64's finaliser (a
// bijection on 64 bits), so positions of one seed never collide.
//
// Speculative sampling with the drafter's distribution (--draft-sampling distribution,
// spec/distribution_verifier.h) needs two more uniforms at each position, independent of the
// token's: the drafter's draw of its candidate there and the acceptance test of that candidate.
// They are further streams, Mix(Mix(Mix(seed) + p) + s) for a stream constant s, pure functions
// of (seed, position, stream) too: drafting never consumes the token stream, and seeded runs
// reproduce.

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

// Which uniform of a position: the token draw (PositionUniform's), the drafter's draw of its
// candidate, or the acceptance test of that candidate. The constants are arbitrary distinct
// 64-bit values (π's hexadecimal fraction digits, the second made odd), so the streams' 64-bit
// hashes differ at every (seed, position).
enum class UniformStream : uint64_t {
  kToken = 0,
  kDraft = 0x243F6A8885A308D3ULL,
  kAccept = 0x13198A2E03707345ULL,
};

// Uniform in [0, 1) of `stream` at `position` for `seed`; kToken is PositionUniform.
inline double StreamUniform(uint64_t seed, int64_t position, UniformStream stream) {
  uint64_t h = PositionMix(PositionMix(seed) + static_cast<uint64_t>(position));
  if (stream != UniformStream::kToken) h = PositionMix(h + static_cast<uint64_t>(stream));
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

}  // namespace dscale
