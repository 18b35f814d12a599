// LinearBf16 (BF16 weights × f32 activations) against the reference Linear on the same weights
// widened to f32 — widening is exact, so the only difference is f32 rounding: each output is a
// dot product of `in` terms (plus the accumulated y), within γ_(in+1)·Σ|terms| of the reference's
// double sum (float_bounds.h). Every variant and the dispatched kernel at odd sizes are cells of
// the op table (op_parity_test.cc); here, what it does not check: inputs wide enough for the
// four-output passes, a row's bits against the rows beside it, the BF16-activation FMA variants
// against the f32 tiles, the rounding, and empty shapes.

#include "kernels/cpu/gemm_bf16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "float_bounds.h"
#include "kernel_test_util.h"
#include "kernels/reference/reference_kernels.h"

namespace dscale {
namespace {

using testing::RandomNormal;

struct Case {
  std::vector<float> x, w_wide, y0;
  std::vector<uint16_t> w;  // one leading element, so the matrix starts 2-byte aligned only
};

Case MakeCase(std::mt19937& rng, int64_t rows, int64_t in, int64_t out) {
  Case c;
  c.x = RandomNormal(rng, rows * in);
  c.y0 = RandomNormal(rng, rows * out);
  const std::vector<float> w = RandomNormal(rng, out * in);
  c.w.assign(out * in + 1, 0);
  c.w_wide.resize(out * in);
  for (int64_t i = 0; i < out * in; ++i) {
    c.w[i + 1] = F32ToBf16(w[i]);
    c.w_wide[i] = Bf16ToF32(c.w[i + 1]);
  }
  return c;
}

void ExpectWithinBound(const Case& c, const std::vector<float>& got, int64_t rows, int64_t in,
                       int64_t out, bool accumulate) {
  std::vector<float> want = c.y0;
  ref::Linear(c.x.data(), c.w_wide.data(), want.data(), rows, in, out, accumulate);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double mass = accumulate ? std::fabs(c.y0[r * out + o]) : 0.0;
      for (int64_t i = 0; i < in; ++i) mass += std::fabs(c.x[r * in + i] * c.w_wide[o * in + i]);
      ASSERT_LE(std::fabs(double{got[r * out + o]} - want[r * out + o]),
                testing::FloatGamma(in + 1) * mass + 1e-30)
          << "row " << r << " output " << o;
    }
  }
}

// Inputs wide enough that one and two rows also take the four-output passes (the tiles read
// one output at a time only while the rows' inputs fit in 16 KiB).
TEST(LinearBf16Test, WideInputsMatchTheReference) {
  std::mt19937 rng(9);
  for (const cpu::Bf16Isa isa : cpu::SupportedBf16Isas()) {
    for (const int64_t rows : {1, 2, 3}) {
      for (const int64_t in : {int64_t{2053}, int64_t{4099}}) {
        SCOPED_TRACE(::testing::Message()
                     << cpu::Bf16IsaName(isa) << " rows=" << rows << " in=" << in);
        const Case c = MakeCase(rng, rows, in, 9);
        std::vector<float> y = c.y0;
        cpu::LinearBf16Tiled(isa, c.x.data(), c.w.data() + 1, y.data(), rows, in, 9, false);
        ExpectWithinBound(c, y, rows, in, 9, false);
      }
    }
  }
}

// Greedy speculation is lossless only if a verified row gets the logits a decode step would:
// within the tiled range, a row's outputs are the same bits whatever rows share the call (tile
// heights and the passes' output counts change with the row count; no output's sum does).
TEST(LinearBf16Test, ARowsOutputsDoNotDependOnTheRowsBesideIt) {
  std::mt19937 rng(10);
  for (const cpu::Bf16Isa isa : cpu::SupportedBf16Isas()) {
    for (const int64_t rows : {2, 3, 5, 8, 13}) {
      for (const int64_t in : {int64_t{17}, int64_t{1031}, int64_t{2053}, int64_t{4099}}) {
        SCOPED_TRACE(::testing::Message()
                     << cpu::Bf16IsaName(isa) << " rows=" << rows << " in=" << in);
        constexpr int64_t kOut = 11;
        const Case c = MakeCase(rng, rows, in, kOut);
        std::vector<float> together(rows * kOut);
        cpu::LinearBf16Tiled(isa, c.x.data(), c.w.data() + 1, together.data(), rows, in, kOut,
                             false);
        for (int64_t r = 0; r < rows; ++r) {
          std::vector<float> alone(kOut);
          cpu::LinearBf16Tiled(isa, c.x.data() + r * in, c.w.data() + 1, alone.data(), 1, in, kOut,
                               false);
          for (int64_t o = 0; o < kOut; ++o) {
            ASSERT_EQ(std::bit_cast<uint32_t>(alone[o]),
                      std::bit_cast<uint32_t>(together[r * kOut + o]))
                << "row " << r << " output " << o;
          }
        }
      }
    }
  }
}

// ---- BF16 activations (Bf16Activations::kBf16): the model is x rounded to BF16 (F32ToBf16)
// times the BF16 weights. Every product of two BF16 values is exact in f32 (8 × 8 significant
// bits), so each variant differs from the double reference only by the rounding of its f32 sums,
// in whatever order it takes them (vdpbf16ps adds pairs into 16 lanes, then a tree; the FMA
// variants 8 or 16 lanes, AMX's tdpbf16ps 32 products a step into one running sum): within
// γ_(in+1)·(Σ|x_bf16·w| + |y0|) (float_bounds.h). vdpbf16ps and tdpbf16ps flush subnormal inputs
// and outputs to zero; RandomNormal's values and their products are
// far from the subnormal range, so that never shows here.

std::vector<float> RoundedToBf16(const std::vector<float>& x) {
  std::vector<float> rounded(x.size());
  for (size_t i = 0; i < x.size(); ++i) rounded[i] = Bf16ToF32(F32ToBf16(x[i]));
  return rounded;
}

void ExpectWithinBf16ActivationBound(const Case& c, const std::vector<float>& got, int64_t rows,
                                     int64_t in, int64_t out, bool accumulate) {
  const std::vector<float> xb = RoundedToBf16(c.x);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double want = accumulate ? double{c.y0[r * out + o]} : 0.0;
      double mass = std::fabs(want);
      for (int64_t i = 0; i < in; ++i) {
        const double term = double{xb[r * in + i]} * c.w_wide[o * in + i];
        want += term;
        mass += std::fabs(term);
      }
      ASSERT_LE(std::fabs(double{got[r * out + o]} - want),
                testing::FloatGamma(in + 1) * mass + 1e-30)
          << "row " << r << " output " << o;
    }
  }
}

TEST(LinearBf16ActivationsTest, WideInputsMatchTheReference) {
  std::mt19937 rng(12);
  for (const cpu::Bf16DotIsa isa : cpu::SupportedBf16DotIsas()) {
    for (const int64_t rows : {1, 2, 3, 16}) {
      for (const int64_t in : {int64_t{2053}, int64_t{6151}}) {
        SCOPED_TRACE(::testing::Message()
                     << cpu::Bf16DotIsaName(isa) << " rows=" << rows << " in=" << in);
        const Case c = MakeCase(rng, rows, in, 9);
        std::vector<float> y = c.y0;
        cpu::LinearBf16DotTiled(isa, c.x.data(), c.w.data() + 1, y.data(), rows, in, 9, false);
        ExpectWithinBf16ActivationBound(c, y, rows, in, 9, false);
      }
    }
  }
}

// Lossless speculation in the BF16-activation mode: a verified row gets the bits a decode row
// would, in every variant and through the dispatched kernel within its tiled range (rows up to a
// verify block and past it, and up to seven 16-row tiles, which AMX multiplies up to six at a time
// by each weight tile, four with the weights and activations in two registers each, five or six
// with fewer: 65, 81 and 96 rows take one pass of five or six tiles, 97 two of four and three;
// AMX reads one row of whole 32-input steps in place, more rows packed, hence in = 1024).
TEST(LinearBf16ActivationsTest, ARowsOutputsDoNotDependOnTheRowsBesideIt) {
  std::mt19937 rng(14);
  constexpr int64_t kOut = 11;
  const auto expect_rows_alone = [&](const auto& linear, int64_t rows, int64_t in) {
    const Case c = MakeCase(rng, rows, in, kOut);
    std::vector<float> together(rows * kOut);
    linear(c.x.data(), c.w.data() + 1, together.data(), rows, in);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> alone(kOut);
      linear(c.x.data() + r * in, c.w.data() + 1, alone.data(), 1, in);
      for (int64_t o = 0; o < kOut; ++o) {
        ASSERT_EQ(std::bit_cast<uint32_t>(alone[o]),
                  std::bit_cast<uint32_t>(together[r * kOut + o]))
            << "row " << r << " output " << o;
      }
    }
  };
  for (const int64_t rows : {2, 3, 5, 8, 13, 16, 17, 33, 50, 64, 65, 81, 96, 97}) {
    for (const int64_t in :
         {int64_t{17}, int64_t{1024}, int64_t{1031}, int64_t{2053}, int64_t{4099}}) {
      for (const cpu::Bf16DotIsa isa : cpu::SupportedBf16DotIsas()) {
        SCOPED_TRACE(::testing::Message()
                     << cpu::Bf16DotIsaName(isa) << " rows=" << rows << " in=" << in);
        expect_rows_alone(
            [isa](const float* x, const uint16_t* w, float* y, int64_t n, int64_t k) {
              cpu::LinearBf16DotTiled(isa, x, w, y, n, k, kOut, false);
            },
            rows, in);
      }
      SCOPED_TRACE(::testing::Message() << "dispatched rows=" << rows << " in=" << in);
      expect_rows_alone(
          [](const float* x, const uint16_t* w, float* y, int64_t n, int64_t k) {
            cpu::LinearBf16(x, w, y, n, k, kOut, false, 0, cpu::Bf16Activations::kBf16);
          },
          rows, in);
    }
  }
}

// The kernels keep their packed activations between calls (AMX packs a call's row tiles on the
// threads into a buffer it reuses): a call's padding past its inputs and rows must be its own
// zeros, whatever an earlier, wider call left there. NaN activations before make any stale pair
// show as NaN outputs after.
TEST(LinearBf16ActivationsTest, ACallReadsNothingAnEarlierCallLeft) {
  std::mt19937 rng(17);
  for (const auto& [rows, in] : {std::pair<int64_t, int64_t>{40, 2053}, {33, 4099}, {7, 1031}}) {
    SCOPED_TRACE(::testing::Message() << "rows=" << rows << " in=" << in);
    constexpr int64_t kWideIn = 4160, kOut = 5;
    const std::vector<float> nan_x(48 * kWideIn, std::numeric_limits<float>::quiet_NaN());
    const Case wide = MakeCase(rng, 48, kWideIn, kOut);
    std::vector<float> scratch(48 * kOut);
    cpu::LinearBf16(nan_x.data(), wide.w.data() + 1, scratch.data(), 48, kWideIn, kOut, false, 0,
                    cpu::Bf16Activations::kBf16);
    const Case c = MakeCase(rng, rows, in, kOut);
    std::vector<float> y(rows * kOut);
    cpu::LinearBf16(c.x.data(), c.w.data() + 1, y.data(), rows, in, kOut, false, 0,
                    cpu::Bf16Activations::kBf16);
    ExpectWithinBf16ActivationBound(c, y, rows, in, kOut, false);
  }
}

// The FMA variants are the f32 tiles on the rounded activations, bit for bit: the mode changes
// the activations, nothing else.
TEST(LinearBf16ActivationsTest, FmaVariantsAreTheF32TilesOnRoundedActivations) {
  std::mt19937 rng(15);
  for (const cpu::Bf16Isa isa : cpu::SupportedBf16Isas()) {
    const auto dot_isa = static_cast<cpu::Bf16DotIsa>(static_cast<int>(isa));
    ASSERT_EQ(cpu::Bf16DotIsaName(dot_isa), cpu::Bf16IsaName(isa));
    for (const int64_t rows : {1, 4, 16}) {
      SCOPED_TRACE(::testing::Message() << cpu::Bf16IsaName(isa) << " rows=" << rows);
      constexpr int64_t kIn = 259, kOut = 13;
      const Case c = MakeCase(rng, rows, kIn, kOut);
      const std::vector<float> xb = RoundedToBf16(c.x);
      std::vector<float> want(rows * kOut), got(rows * kOut);
      cpu::LinearBf16Tiled(isa, xb.data(), c.w.data() + 1, want.data(), rows, kIn, kOut, false);
      cpu::LinearBf16DotTiled(dot_isa, c.x.data(), c.w.data() + 1, got.data(), rows, kIn, kOut,
                              false);
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i])) << i;
      }
    }
  }
}

TEST(LinearBf16ActivationsTest, RoundingIsF32ToBf16) {
  std::mt19937 rng(16);
  // Ties to even both ways, the largest finite value, infinities, NaNs, subnormals, zeros (in
  // the vector loop), then random values.
  std::vector<float> x;
  for (const uint32_t bits :
       {0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00001u, 0xff800001u,
        0x00000001u, 0x807fffffu, 0x0u, 0x80000000u, 0x3f80ffffu}) {
    x.push_back(std::bit_cast<float>(bits));
  }
  for (const float v : RandomNormal(rng, 1001)) x.push_back(v);
  std::vector<uint16_t> got(x.size());
  cpu::RoundToBf16(x.data(), static_cast<int64_t>(x.size()), got.data());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], F32ToBf16(x[i])) << i;
  EXPECT_EQ(cpu::Bf16ActivationsFromName("bf16"), cpu::Bf16Activations::kBf16);
  EXPECT_EQ(cpu::Bf16ActivationsFromName("f32"), cpu::Bf16Activations::kF32);
  EXPECT_EQ(cpu::Bf16ActivationsFromName("fp32"), std::nullopt);
  EXPECT_EQ(cpu::Bf16ActivationsName(cpu::Bf16Activations::kBf16), "bf16");
}

TEST(LinearBf16Test, EmptyShapes) {
  const std::vector<uint16_t> w(6, F32ToBf16(1.0f));
  float y = 42.0f;
  cpu::LinearBf16(nullptr, w.data(), &y, 0, 3, 2);
  EXPECT_EQ(y, 42.0f);
  std::vector<float> ys = {1.0f, 2.0f};
  cpu::LinearBf16(nullptr, w.data(), ys.data(), 1, 0, 2);
  EXPECT_EQ(ys, (std::vector<float>{0.0f, 0.0f}));
  ys = {1.0f, 2.0f};
  cpu::LinearBf16(nullptr, w.data(), ys.data(), 1, 0, 2, /*accumulate=*/true);
  EXPECT_EQ(ys, (std::vector<float>{1.0f, 2.0f}));
}

TEST(LinearBf16Test, PortableVariantIsAlwaysSupported) {
  const std::vector<cpu::Bf16Isa> isas = cpu::SupportedBf16Isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), cpu::Bf16Isa::kPortable);
}

}  // namespace
}  // namespace dscale
