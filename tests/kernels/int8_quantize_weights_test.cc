// cpu::QuantizeInt8Weights (the load-time weight quantiser of `--weights int8`) against
// ref::QuantizeWeightsInt8. A group's maximum, the division by its scale and the conversion to
// nearest even are exact operations, so both variants (portable, and AVX2 where this CPU has it)
// must give the reference's values and scales bit for bit: at row lengths that are not multiples
// of 32 (a short last group), over groups of mixed magnitudes, all-zero groups, groups whose
// scale underflows to 0, and values exactly halfway between two steps.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/reference/reference_kernels.h"

namespace dscale {
namespace {

using cpu::Int8Groups;
using cpu::kInt8GroupSize;

struct Quantized {
  std::vector<int8_t> q;
  std::vector<cpu::Int8Scale> scales;
};

Quantized Quantize(const std::vector<float>& w, int64_t rows, int64_t in, bool vector) {
  // Filled with a value the quantiser never writes, so a skipped element shows.
  Quantized out{std::vector<int8_t>(rows * in, -128),
                std::vector<cpu::Int8Scale>(rows * Int8Groups(in), 0xffff)};
  cpu::QuantizeInt8Weights(w.data(), rows, in, out.q.data(), out.scales.data(), vector);
  return out;
}

void ExpectReference(const std::vector<float>& w, int64_t rows, int64_t in, bool vector) {
  const Quantized got = Quantize(w, rows, in, vector);
  std::vector<int8_t> q(in);
  std::vector<float> scales(Int8Groups(in));
  for (int64_t r = 0; r < rows; ++r) {
    ref::QuantizeWeightsInt8(w.data() + r * in, in, kInt8GroupSize, q.data(), scales.data());
    for (int64_t g = 0; g < Int8Groups(in); ++g) {
      ASSERT_EQ(std::bit_cast<uint32_t>(cpu::Int8ScaleValue(got.scales[r * Int8Groups(in) + g])),
                std::bit_cast<uint32_t>(scales[g]))
          << "row " << r << " group " << g;
    }
    for (int64_t i = 0; i < in; ++i) ASSERT_EQ(got.q[r * in + i], q[i]) << "row " << r << " " << i;
  }
}

// Rows of normal values, each group scaled by 10^[-6, 3]; some groups all zero, some below the
// scale's underflow (127 × the smallest subnormal), some holding exact half steps of their scale.
std::vector<float> MakeWeights(std::mt19937& rng, int64_t rows, int64_t in) {
  std::vector<float> w = testing::RandomNormal(rng, rows * in);
  std::uniform_real_distribution<float> decade(-6.0f, 3.0f);
  std::uniform_int_distribution<int> kind(0, 9), step(-126, 125);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < Int8Groups(in); ++g) {
      float* wg = w.data() + r * in + g * kInt8GroupSize;
      const int64_t n = std::min(kInt8GroupSize, in - g * kInt8GroupSize);
      const int k = kind(rng);
      const float m = std::pow(10.0f, decade(rng));
      for (int64_t i = 0; i < n; ++i) {
        if (k == 0) {
          wg[i] = 0.0f;
        } else if (k == 1) {
          wg[i] = wg[i] * 1e-44f;  // subnormal or zero: the scale rounds to 0 or the first step
        } else if (k == 2) {
          // Scale 2^-6 exactly (the largest is 127 steps), the rest halfway between two steps.
          wg[i] = i == 0 ? 127 * 0x1p-6f : (static_cast<float>(step(rng)) + 0.5f) * 0x1p-6f;
        } else {
          wg[i] *= m;
        }
      }
    }
  }
  return w;
}

TEST(QuantizeInt8WeightsTest, BothVariantsGiveTheReferencesBitsAtOddSizes) {
  std::mt19937 rng(21);
  for (const int64_t in : {1, 5, 31, 32, 33, 63, 64, 65, 100, 1031}) {
    SCOPED_TRACE(::testing::Message() << "in=" << in);
    const int64_t rows = 7;
    const std::vector<float> w = MakeWeights(rng, rows, in);
    for (const bool vector : {false, true}) {
      SCOPED_TRACE(vector ? "vector" : "portable");
      ExpectReference(w, rows, in, vector);
    }
  }
}

TEST(QuantizeInt8WeightsTest, RoundsHalfStepsToEvenAndClampsAtTheScale) {
  // Scale 1: the largest is 127. 2.5 → 2, 3.5 → 4, −2.5 → −2, −0.5 → −0, 126.5 → 126.
  std::vector<float> w(64, 0.0f);
  w[0] = 127.0f;
  w[1] = 2.5f;
  w[2] = 3.5f;
  w[3] = -2.5f;
  w[4] = -0.5f;
  w[5] = 126.5f;
  // Group 2: a largest of 1, whose exact scale 1/127 (f32 0x3c010204) rounds up to the BF16
  // value 0x3c02 (0.0079345703125), so the largest lands at 126.03 steps: 126.
  w[32] = 1.0f;
  w[33] = -1.0f;
  for (const bool vector : {false, true}) {
    SCOPED_TRACE(vector ? "vector" : "portable");
    const Quantized got = Quantize(w, 1, 64, vector);
    EXPECT_EQ(cpu::Int8ScaleValue(got.scales[0]), 1.0f);
    EXPECT_EQ(got.q[1], 2);
    EXPECT_EQ(got.q[2], 4);
    EXPECT_EQ(got.q[3], -2);
    EXPECT_EQ(got.q[4], 0);
    EXPECT_EQ(got.q[5], 126);
    EXPECT_EQ(got.scales[1], 0x3c02);
    EXPECT_EQ(got.q[32], 126);
    EXPECT_EQ(got.q[33], -126);
    ExpectReference(w, 1, 64, vector);
  }
}

TEST(QuantizeInt8WeightsTest, EmptyShapesWriteNothing) {
  const std::vector<float> w(4, 1.0f);
  int8_t q = 7;
  cpu::Int8Scale s = 9;
  cpu::QuantizeInt8Weights(w.data(), 0, 4, &q, &s);
  cpu::QuantizeInt8Weights(w.data(), 3, 0, &q, &s);
  EXPECT_EQ(q, 7);
  EXPECT_EQ(s, 9);
}

}  // namespace
}  // namespace dscale
