#pragma once
// Fixed request manifests: which prompt each request of a run sends (and, in an open loop, when). A
// manifest depends only on (distinct prompts, warm-up, measured, seed), so every mode and
// concurrency sees the same requests in the same order. Prompts repeat deterministically: the
// sequence walks one seeded permutation of the distinct prompts, cyclically, warm-up first.

#include <cstdint>
#include <vector>

namespace dscale::bench {

struct Manifest {
  int32_t distinct = 0;           // prompts to choose from
  std::vector<int32_t> warmup;    // prompt index per warm-up request, in submission order
  std::vector<int32_t> measured;  // prompt index per measured request
};

// A permutation of [0, n) from `seed` (its own generator, so it is the same on every platform).
std::vector<int32_t> SeededPermutation(int32_t n, uint64_t seed);

Manifest BuildManifest(int32_t distinct, int32_t warmup, int32_t measured, uint64_t seed);

// When each of `count` requests arrives in an open loop: a Poisson process of `rate` requests a
// second (exponential gaps drawn from `seed` with its own generator, so every mode, concurrency
// and platform sees the same times), the first at 0. Seconds from the loop's start,
// nondecreasing. rate > 0.
std::vector<double> PoissonArrivals(int32_t count, double rate, uint64_t seed);

}  // namespace dscale::bench
