#pragma once
// A random call of the int8-weight linear kernels (gemm_int8.h) for their tests: activations,
// the accumulate target, weights over the range the weight quantiser produces ([-127, 127]) one
// element past an aligned start, and BF16 scales spread over three decades with some groups zero
// (an all-zero group quantises to scale 0).

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/gemm_int8.h"

namespace dscale::testing {

struct Int8Case {
  std::vector<float> x, y0;            // [rows, in], [rows, out]
  std::vector<int8_t> w;               // one leading element, so the matrix starts unaligned
  std::vector<cpu::Int8Scale> scales;  // [out, groups]

  const int8_t* weights() const { return w.data() + 1; }
  // The scales' f32 values (the reference kernels take those).
  std::vector<float> scale_values() const {
    std::vector<float> values(scales.size());
    for (size_t i = 0; i < scales.size(); ++i) values[i] = cpu::Int8ScaleValue(scales[i]);
    return values;
  }
  float scale(int64_t index) const {
    return cpu::Int8ScaleValue(scales[static_cast<size_t>(index)]);
  }
};

inline Int8Case MakeInt8Case(std::mt19937& rng, int64_t rows, int64_t in, int64_t out) {
  Int8Case c;
  c.x = RandomNormal(rng, rows * in);
  c.y0 = RandomNormal(rng, rows * out);
  std::uniform_int_distribution<int> value(-127, 127);
  c.w.resize(out * in + 1);
  for (int8_t& q : c.w) q = static_cast<int8_t>(value(rng));
  std::uniform_real_distribution<float> exponent(-4.0f, -1.0f);
  std::bernoulli_distribution zero(0.05);
  c.scales.resize(out * cpu::Int8Groups(in));
  for (cpu::Int8Scale& s : c.scales) {
    s = cpu::Int8ScaleAtLeast(zero(rng) ? 0.0f : std::pow(10.0f, exponent(rng)));
  }
  return c;
}

}  // namespace dscale::testing
