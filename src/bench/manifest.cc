#include "bench/manifest.h"

#include <cmath>
#include <numeric>
#include <utility>

#include "core/check.h"

namespace dscale::bench {
namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::vector<int32_t> SeededPermutation(int32_t n, uint64_t seed) {
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  uint64_t state = seed;
  for (int32_t i = n - 1; i > 0; --i) {  // Fisher–Yates
    const auto j = static_cast<int32_t>(SplitMix64(state) % static_cast<uint64_t>(i + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

Manifest BuildManifest(int32_t distinct, int32_t warmup, int32_t measured, uint64_t seed) {
  DSCALE_CHECK(distinct > 0 && warmup >= 0 && measured >= 0);
  const std::vector<int32_t> order = SeededPermutation(distinct, seed);
  Manifest m{.distinct = distinct};
  for (int32_t i = 0; i < warmup + measured; ++i) {
    const int32_t prompt = order[static_cast<size_t>(i % distinct)];
    (i < warmup ? m.warmup : m.measured).push_back(prompt);
  }
  return m;
}

std::vector<double> PoissonArrivals(int32_t count, double rate, uint64_t seed) {
  DSCALE_CHECK(count >= 0 && rate > 0);
  std::vector<double> at;
  at.reserve(static_cast<size_t>(count));
  // A stream of its own, apart from the manifest's permutation of the same seed.
  uint64_t state = seed ^ 0xA5A5A5A5A5A5A5A5ull;
  double t = 0;
  for (int32_t i = 0; i < count; ++i) {
    at.push_back(t);
    // u uniform in (0, 1] from the top 53 bits; the gap −ln(u) / rate is exponential.
    const double u = static_cast<double>((SplitMix64(state) >> 11) + 1) * 0x1p-53;
    t += -std::log(u) / rate;
  }
  return at;
}

}  // namespace dscale::bench
