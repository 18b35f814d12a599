// LinearInt8 with Int8Activations::kInt8 (int8 weights × activations quantised per 32 inputs)
// against ref::LinearInt8Int8. The integer dot products are exact and the f32 accumulation has
// one specified order (gemm_int8.h), so every variant this CPU runs must give the reference's
// bits exactly. Odd sizes in every variant (and the quantiser against its reference) are cells
// of the op table (op_parity_test.cc); here inputs longer than one pack of groups, column blocks,
// a row's bits against the rows beside it, the quantiser's edge cases and non-finite groups.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "int8_case.h"
#include "kernel_test_util.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/reference/reference_kernels.h"

namespace dscale {
namespace {

using testing::RandomNormal;

using Case = testing::Int8Case;

// testing::MakeInt8Case with activations of mixed magnitudes (each row scaled by 10^±3) and some
// all-zero groups.
Case MakeCase(std::mt19937& rng, int64_t rows, int64_t in, int64_t out) {
  Case c = testing::MakeInt8Case(rng, rows, in, out);
  std::uniform_real_distribution<float> magnitude(-3.0f, 3.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float m = std::pow(10.0f, magnitude(rng));
    for (int64_t i = 0; i < in; ++i) c.x[r * in + i] *= m;
  }
  std::bernoulli_distribution zero_group(0.05);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < cpu::Int8Groups(in); ++g) {
      if (!zero_group(rng)) continue;
      for (int64_t i = g * 32; i < std::min(in, (g + 1) * 32); ++i) c.x[r * in + i] = 0.0f;
    }
  }
  return c;
}

std::vector<float> Reference(const Case& c, int64_t rows, int64_t in, int64_t out,
                             bool accumulate) {
  std::vector<float> want = c.y0;
  ref::LinearInt8Int8(c.x.data(), c.weights(), c.scale_values().data(), want.data(), rows, in, out,
                      cpu::kInt8GroupSize, accumulate);
  return want;
}

// Same bits, or both NaN.
void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << "element " << i;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
          << "element " << i << ": " << got[i] << " vs " << want[i];
    }
  }
}

// More groups than one pack (32), so the lanes' sums carry across packs; outputs over several
// panels and threads; rows over several row tiles, the last one short.
TEST(LinearInt8DotTest, WideInputsGiveTheReferencesBits) {
  std::mt19937 rng(5);
  for (const cpu::Int8DotIsa isa : cpu::SupportedInt8DotIsas()) {
    for (const int64_t in : {1025, 2080, 3000}) {
      for (const int64_t rows : {1, 6, 16, 37}) {
        SCOPED_TRACE(::testing::Message()
                     << cpu::Int8DotIsaName(isa) << " rows=" << rows << " in=" << in);
        const int64_t out = 67;
        const Case c = MakeCase(rng, rows, in, out);
        std::vector<float> y = c.y0;
        cpu::LinearInt8Dot(isa, c.x.data(), c.weights(), c.scales.data(), y.data(), rows, in, out,
                           /*accumulate=*/false);
        ExpectSameBits(y, Reference(c, rows, in, out, false));
      }
    }
  }
}

TEST(LinearInt8DotTest, DispatchedKernelGivesTheReferencesBitsIntoAColumnBlock) {
  std::mt19937 rng(7);
  const int64_t rows = 5, in = 70, out = 19, ldy = 24;
  const Case c = MakeCase(rng, rows, in, out);
  std::vector<float> wide(rows * ldy, -7.0f);
  cpu::LinearInt8(c.x.data(), c.weights(), c.scales.data(), wide.data() + 3, rows, in, out,
                  /*accumulate=*/false, ldy, cpu::Int8Activations::kInt8);
  const std::vector<float> want = Reference(c, rows, in, out, false);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < ldy; ++o) {
      const float expected = o >= 3 && o < 3 + out ? want[r * out + o - 3] : -7.0f;
      EXPECT_EQ(wide[r * ldy + o], expected) << r << ", " << o;
    }
  }
}

// The panel layout (gemm_int8.h) gives the reference's bits, whichever kernel this CPU runs on it
// (the panels' own with AVX512-VNNI, chunks copied to rows elsewhere): a matrix from lanes 0, 5
// and 15 of its first panel, a short last group, more groups than one pack (32), rows within one
// tile and over several, accumulating into a column block.
TEST(LinearInt8DotTest, PanelsGiveTheReferencesBits) {
  std::mt19937 rng(11);
  for (const int64_t in : {5, 70, 1025}) {
    for (const int64_t rows : {1, 6, 16, 17, 37}) {
      for (const int64_t first : {0, 5, 15}) {
        SCOPED_TRACE(::testing::Message() << "rows=" << rows << " in=" << in << " first=" << first);
        const int64_t out = 67, ldy = 70, groups = cpu::Int8Groups(in);
        const Case c = MakeCase(rng, rows, in, out);
        // `first` leading rows of other values, so the matrix starts at that lane.
        std::vector<int8_t> w((first + out) * in, 99);
        std::copy_n(c.weights(), out * in, w.begin() + first * in);
        std::vector<cpu::Int8Scale> scales((first + out) * groups, 0x3f80);
        std::copy(c.scales.begin(), c.scales.end(), scales.begin() + first * groups);
        const int64_t panels = cpu::QuantPanels(0, first + out);
        std::vector<int8_t> packed(panels * cpu::Int8PanelBytes(in));
        std::vector<cpu::Int8Scale> packed_scales(panels * cpu::QuantPanelScales(in));
        cpu::PackInt8Panels(w.data(), scales.data(), first + out, in, packed.data(),
                            packed_scales.data());
        const cpu::Int8Matrix m{.values = packed.data(),
                                .scales = packed_scales.data(),
                                .layout = cpu::QuantLayout::kPanels,
                                .first = first};
        std::vector<float> wide(rows * ldy, -7.0f);
        for (int64_t r = 0; r < rows; ++r) std::copy_n(&c.y0[r * out], out, &wide[r * ldy + 2]);
        cpu::LinearInt8(c.x.data(), m, wide.data() + 2, rows, in, out, /*accumulate=*/true, ldy,
                        cpu::Int8Activations::kInt8);
        const std::vector<float> want = Reference(c, rows, in, out, true);
        std::vector<float> got(rows * out);
        for (int64_t r = 0; r < rows; ++r) {
          std::copy_n(&wide[r * ldy + 2], out, &got[r * out]);
          EXPECT_EQ(wide[r * ldy], -7.0f);
          EXPECT_EQ(wide[r * ldy + 2 + out], -7.0f);
        }
        ExpectSameBits(got, want);
      }
    }
  }
}

// A row's outputs are the same bits whatever rows share the call: every row of a 17-row call
// against the row alone, with the other rows' values changed.
TEST(LinearInt8DotTest, ARowsOutputsDoNotDependOnTheRowsBesideIt) {
  std::mt19937 rng(9);
  const int64_t rows = 17, in = 200, out = 45;
  const Case c = MakeCase(rng, rows, in, out);
  for (const cpu::Int8DotIsa isa : cpu::SupportedInt8DotIsas()) {
    SCOPED_TRACE(cpu::Int8DotIsaName(isa));
    std::vector<float> all(rows * out);
    cpu::LinearInt8Dot(isa, c.x.data(), c.weights(), c.scales.data(), all.data(), rows, in, out,
                       false);
    for (int64_t r = 0; r < rows; ++r) {
      // Row r between two rows of other values, and alone.
      std::vector<float> three = RandomNormal(rng, 3 * in, 0.0f, 1000.0f);
      std::copy_n(c.x.data() + r * in, in, three.data() + in);
      std::vector<float> y3(3 * out), y1(out);
      cpu::LinearInt8Dot(isa, three.data(), c.weights(), c.scales.data(), y3.data(), 3, in, out,
                         false);
      cpu::LinearInt8Dot(isa, c.x.data() + r * in, c.weights(), c.scales.data(), y1.data(), 1, in,
                         out, false);
      const std::vector<float> want(all.begin() + r * out, all.begin() + (r + 1) * out);
      ExpectSameBits(std::vector<float>(y3.begin() + out, y3.begin() + 2 * out), want);
      ExpectSameBits(y1, want);
    }
  }
}

// ---- The activation quantiser.

struct Quantized {
  std::vector<int8_t> q;  // [groups · 32]
  std::vector<float> scales;
  std::vector<int32_t> sums;
};

Quantized Quantize(const std::vector<float>& x) {
  const auto in = static_cast<int64_t>(x.size());
  const int64_t groups = cpu::Int8Groups(in);
  Quantized out{std::vector<int8_t>(groups * 32, 99), std::vector<float>(groups),
                std::vector<int32_t>(groups)};
  cpu::QuantizeInt8Activations(x.data(), 1, in, out.q.data(), out.scales.data(), out.sums.data());
  return out;
}

TEST(QuantizeInt8ActivationsTest, AllZeroGroupHasScaleZero) {
  const Quantized got = Quantize(std::vector<float>(40, 0.0f));
  EXPECT_EQ(got.scales, (std::vector<float>{0.0f, 0.0f}));
  EXPECT_EQ(got.q, std::vector<int8_t>(64, 0));
  // A largest value below 127 × the smallest subnormal: the scale rounds to 0, so do the values.
  const Quantized tiny = Quantize(std::vector<float>(32, 1e-44f));
  EXPECT_EQ(tiny.scales[0], 0.0f);
  EXPECT_EQ(tiny.q, std::vector<int8_t>(32, 0));
}

TEST(QuantizeInt8ActivationsTest, OneHugeValueTakesTheGrid) {
  std::vector<float> x(64, 1.0f);
  x[5] = -3e38f;
  const Quantized got = Quantize(x);
  EXPECT_EQ(got.scales[0], 3e38f / 127.0f);
  EXPECT_EQ(got.scales[1], 1.0f / 127.0f);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(got.q[i], i == 5 ? -127 : 0) << i;
  for (int i = 32; i < 64; ++i) EXPECT_EQ(got.q[i], 127) << i;
  EXPECT_EQ(got.sums[0], -127);
}

TEST(QuantizeInt8ActivationsTest, RoundsToNearestEven) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // scale 1
  x[1] = 2.5f;
  x[2] = 3.5f;
  x[3] = -2.5f;
  x[4] = 0.49f;
  const Quantized got = Quantize(x);
  EXPECT_EQ(got.scales[0], 1.0f);
  EXPECT_EQ(got.q[1], 2);
  EXPECT_EQ(got.q[2], 4);
  EXPECT_EQ(got.q[3], -2);
  EXPECT_EQ(got.q[4], 0);
}

// A group holding a NaN or an infinity gets scale NaN and values 0 (its other groups are
// quantised as usual), so every output of its row is NaN and the row's failure shows at its
// logits; the rows beside it are untouched.
TEST(QuantizeInt8ActivationsTest, NonFiniteGroupsTurnTheirRowsOutputsNaN) {
  for (const float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity()}) {
    SCOPED_TRACE(bad);
    std::vector<float> x(64, 0.5f);
    x[40] = bad;
    const Quantized got = Quantize(x);
    EXPECT_EQ(got.scales[0], 0.5f / 127.0f);
    EXPECT_TRUE(std::isnan(got.scales[1]));
    for (int i = 32; i < 64; ++i) EXPECT_EQ(got.q[i], 0) << i;
    EXPECT_EQ(got.sums[1], 0);

    std::mt19937 rng(13);
    const int64_t rows = 3, in = 64, out = 21;
    Case c = MakeCase(rng, rows, in, out);
    c.x[in + 40] = bad;  // row 1
    for (const cpu::Int8DotIsa isa : cpu::SupportedInt8DotIsas()) {
      std::vector<float> y(rows * out);
      cpu::LinearInt8Dot(isa, c.x.data(), c.weights(), c.scales.data(), y.data(), rows, in, out,
                         false);
      for (int64_t o = 0; o < out; ++o) {
        EXPECT_TRUE(std::isfinite(y[o])) << o;
        EXPECT_TRUE(std::isnan(y[out + o])) << o;
        EXPECT_TRUE(std::isfinite(y[2 * out + o])) << o;
      }
      ExpectSameBits(y, Reference(c, rows, in, out, false));
    }
  }
}

TEST(LinearInt8DotTest, NamesAndVariants) {
  EXPECT_EQ(cpu::Int8ActivationsFromName("int8"), cpu::Int8Activations::kInt8);
  EXPECT_EQ(cpu::Int8ActivationsFromName("f32"), cpu::Int8Activations::kF32);
  EXPECT_EQ(cpu::Int8ActivationsFromName("bf16"), std::nullopt);
  EXPECT_EQ(cpu::Int8ActivationsName(cpu::Int8Activations::kInt8), "int8");
  const std::vector<cpu::Int8DotIsa> isas = cpu::SupportedInt8DotIsas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), cpu::Int8DotIsa::kPortable);
  EXPECT_EQ(isas.back(), cpu::BestInt8DotIsa());
  // LinearInt8's choice by row count: the best variant, but AMX only from kAmxInt8MinRows rows,
  // and on AMX CPUs one row of up to kInt8OneRowAvx2MaxIn inputs through AVX2.
  const int64_t long_row = cpu::kInt8OneRowAvx2MaxIn + 1;
  EXPECT_EQ(cpu::Int8DotIsaFor(cpu::kAmxInt8MinRows, 2048), cpu::BestInt8DotIsa());
  if (cpu::BestInt8DotIsa() == cpu::Int8DotIsa::kAmx) {
    EXPECT_EQ(cpu::Int8DotIsaFor(1, 2048), cpu::Int8DotIsa::kAvx2);
    EXPECT_EQ(cpu::Int8DotIsaFor(1, long_row), isas[isas.size() - 2]);
    EXPECT_EQ(cpu::Int8DotIsaFor(2, 2048), isas[isas.size() - 2]);
  } else {
    EXPECT_EQ(cpu::Int8DotIsaFor(1, 2048), cpu::BestInt8DotIsa());
    EXPECT_EQ(cpu::Int8DotIsaFor(1, long_row), cpu::BestInt8DotIsa());
  }
}

TEST(LinearInt8DotTest, EmptyShapes) {
  const std::vector<int8_t> w(6, 1);
  const std::vector<cpu::Int8Scale> scales(2, cpu::Int8ScaleAtLeast(1.0f));
  std::vector<float> ys = {1.0f, 2.0f};
  cpu::LinearInt8(nullptr, w.data(), scales.data(), ys.data(), 1, 0, 2, false, 0,
                  cpu::Int8Activations::kInt8);
  EXPECT_EQ(ys, (std::vector<float>{0.0f, 0.0f}));
  float y = 42.0f;
  cpu::LinearInt8(nullptr, w.data(), scales.data(), &y, 0, 3, 2, false, 0,
                  cpu::Int8Activations::kInt8);
  EXPECT_EQ(y, 42.0f);
}

}  // namespace
}  // namespace dscale
