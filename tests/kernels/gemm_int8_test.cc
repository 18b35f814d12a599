// LinearInt8 (8-bit weights, a scale per 32 inputs, × f32 activations) against the reference
// LinearInt8, which dequantises exactly in double. The kernels form each term w·s·x with at most
// two roundings and sum `in` terms plus the accumulated y in f32 (gemm_int8.h), so each output is
// within γ_(in+2)·Σ|terms| of the reference (float_bounds.h), Σ|terms| = |y0| + Σ|x · w · s|.
// Every variant and the dispatched kernel at odd sizes are cells of the op table
// (op_parity_test.cc); here dequantise + sgemm (benchmarks), column blocks of a wider y, the
// dequantised values, the scales' rounding and empty shapes.

#include "kernels/cpu/gemm_int8.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "float_bounds.h"
#include "int8_case.h"
#include "kernel_test_util.h"
#include "kernels/reference/reference_kernels.h"

namespace dscale {
namespace {

using Case = testing::Int8Case;
using testing::MakeInt8Case;

void ExpectWithinBound(const Case& c, const std::vector<float>& got, int64_t rows, int64_t in,
                       int64_t out, bool accumulate) {
  std::vector<float> want = c.y0;
  ref::LinearInt8(c.x.data(), c.weights(), c.scale_values().data(), want.data(), rows, in, out,
                  cpu::kInt8GroupSize, accumulate);
  const int64_t groups = cpu::Int8Groups(in);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double mass = accumulate ? std::fabs(c.y0[r * out + o]) : 0.0;
      for (int64_t i = 0; i < in; ++i) {
        const double weight = static_cast<double>(c.weights()[o * in + i]) *
                              c.scale(o * groups + i / cpu::kInt8GroupSize);
        mass += std::fabs(c.x[r * in + i] * weight);
      }
      ASSERT_LE(std::fabs(double{got[r * out + o]} - want[r * out + o]),
                testing::FloatGamma(in + 2) * mass + 1e-30)
          << "row " << r << " output " << o;
    }
  }
}

TEST(LinearInt8Test, DequantiseAndSgemmMatchesTheReference) {
  std::mt19937 rng(9);
  for (const int64_t rows : {1, 7, 40}) {
    for (const int64_t in : {33, 255}) {
      for (const bool accumulate : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "rows=" << rows << " in=" << in << " accumulate=" << accumulate);
        const Case c = MakeInt8Case(rng, rows, in, 70);
        std::vector<float> y = c.y0;
        cpu::LinearInt8DequantSgemm(c.x.data(), c.weights(), c.scales.data(), y.data(), rows, in,
                                    70, accumulate);
        ExpectWithinBound(c, y, rows, in, 70, accumulate);
      }
    }
  }
}

TEST(LinearInt8Test, WritesIntoAColumnBlockOfAWiderOutput) {
  std::mt19937 rng(10);
  const int64_t rows = 3, in = 45, out = 6, ldy = 11;
  const Case c = MakeInt8Case(rng, rows, in, out);
  std::vector<float> wide(rows * ldy, -7.0f), want(rows * out);
  cpu::LinearInt8(c.x.data(), c.weights(), c.scales.data(), wide.data() + 2, rows, in, out,
                  /*accumulate=*/false, ldy);
  cpu::LinearInt8(c.x.data(), c.weights(), c.scales.data(), want.data(), rows, in, out);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < ldy; ++o) {
      const float expected = o >= 2 && o < 2 + out ? want[r * out + o - 2] : -7.0f;
      EXPECT_EQ(wide[r * ldy + o], expected) << r << ", " << o;  // same kernel, same order
    }
  }
}

// Dequantisation is one rounded product per weight, so every path's f32 weights are the same.
TEST(LinearInt8Test, DequantisedValuesAreTheRoundedProducts) {
  std::mt19937 rng(11);
  for (const int64_t in : {1, 31, 32, 33, 100, 1031}) {
    const Case c = MakeInt8Case(rng, 1, in, 5);
    std::vector<float> got(5 * in);
    cpu::DequantizeInt8Rows(c.weights(), c.scales.data(), 5, in, got.data());
    for (int64_t o = 0; o < 5; ++o) {
      for (int64_t i = 0; i < in; ++i) {
        const float want = static_cast<float>(c.weights()[o * in + i]) *
                           c.scale(o * cpu::Int8Groups(in) + i / cpu::kInt8GroupSize);
        ASSERT_EQ(got[o * in + i], want) << "in=" << in << " o=" << o << " i=" << i;
      }
    }
  }
}

// Scales are BF16 bit patterns; Int8ScaleAtLeast rounds up to the next one (carrying into the
// exponent), keeps values BF16 holds, and widening gives them back exactly.
TEST(LinearInt8Test, ScalesRoundUpToBf16) {
  EXPECT_EQ(cpu::Int8ScaleAtLeast(0.0f), 0);
  EXPECT_EQ(cpu::Int8ScaleAtLeast(1.0f), 0x3f80);
  EXPECT_EQ(cpu::Int8ScaleValue(0x3f80), 1.0f);
  EXPECT_EQ(cpu::Int8ScaleAtLeast(std::bit_cast<float>(0x3f800001u)), 0x3f81);
  EXPECT_EQ(cpu::Int8ScaleAtLeast(std::bit_cast<float>(0x3fffffffu)), 0x4000);  // 2.0
  EXPECT_EQ(cpu::Int8ScaleValue(0x4000), 2.0f);
  const float subnormal = std::bit_cast<float>(0x00000003u);
  EXPECT_EQ(cpu::Int8ScaleAtLeast(subnormal), 0x0001);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> exponent(-40.0f, 30.0f);
  for (int i = 0; i < 1000; ++i) {
    const float v = std::pow(2.0f, exponent(rng));
    const float s = cpu::Int8ScaleValue(cpu::Int8ScaleAtLeast(v));
    ASSERT_GE(s, v) << v;
    ASSERT_EQ(std::bit_cast<uint32_t>(s) & 0xffffu, 0u) << v;
    if (std::isnormal(v)) {
      ASSERT_LE(s, v * (1.0f + 0x1p-7f)) << v;
    }
  }
}

TEST(LinearInt8Test, EmptyShapes) {
  const std::vector<int8_t> w(6, 1);
  const std::vector<cpu::Int8Scale> scales(2, cpu::Int8ScaleAtLeast(1.0f));
  float y = 42.0f;
  cpu::LinearInt8(nullptr, w.data(), scales.data(), &y, 0, 3, 2);
  EXPECT_EQ(y, 42.0f);
  std::vector<float> ys = {1.0f, 2.0f};
  cpu::LinearInt8(nullptr, w.data(), scales.data(), ys.data(), 1, 0, 2);
  EXPECT_EQ(ys, (std::vector<float>{0.0f, 0.0f}));
  ys = {1.0f, 2.0f};
  cpu::LinearInt8(nullptr, w.data(), scales.data(), ys.data(), 1, 0, 2, /*accumulate=*/true);
  EXPECT_EQ(ys, (std::vector<float>{1.0f, 2.0f}));
}

TEST(LinearInt8Test, PortableVariantIsAlwaysSupported) {
  const std::vector<cpu::Bf16Isa> isas = cpu::SupportedBf16Isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), cpu::Bf16Isa::kPortable);
}

}  // namespace
}  // namespace dscale
