// LinearBf16 (BF16 weights × f32 activations) against the reference Linear on the same weights
// widened to f32 — widening is exact, so the only difference is f32 rounding: each output is a
// dot product of `in` terms (plus the accumulated y), within γ_(in+1)·Σ|terms| of the reference's
// double sum (float_bounds.h). Every kernel variant this CPU supports is checked, so the test
// means the same on an AVX2-only and an AVX-512 machine; the many-row path (widen + sgemm) too.

#include "kernels/cpu/gemm_bf16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
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

constexpr int64_t kRows[] = {1, 2, 3, 5, 7, 19, 33, 64, 65, 128, 129, 133};
constexpr int64_t kIns[] = {1, 7, 16, 17, 67, 255, 1031};
constexpr int64_t kOuts[] = {1, 3, 4, 5, 9, 130};

TEST(LinearBf16Test, EveryVariantMatchesTheReferenceAtOddSizes) {
  std::mt19937 rng(7);
  for (const cpu::Bf16Isa isa : cpu::SupportedBf16Isas()) {
    for (const int64_t rows : {1, 2, 3, 4, 5, 7, 9, 33}) {
      for (const int64_t in : kIns) {
        for (const int64_t out : kOuts) {
          for (const bool accumulate : {false, true}) {
            SCOPED_TRACE(::testing::Message()
                         << cpu::Bf16IsaName(isa) << " rows=" << rows << " in=" << in
                         << " out=" << out << " accumulate=" << accumulate);
            const Case c = MakeCase(rng, rows, in, out);
            std::vector<float> y = c.y0;
            cpu::LinearBf16Tiled(isa, c.x.data(), c.w.data() + 1, y.data(), rows, in, out,
                                 accumulate);
            ExpectWithinBound(c, y, rows, in, out, accumulate);
          }
        }
      }
    }
  }
}

TEST(LinearBf16Test, DispatchedKernelMatchesTheReferenceOnBothPaths) {
  std::mt19937 rng(8);
  for (const int64_t rows : kRows) {  // both sides of every variant's LinearBf16TiledRowLimit
    for (const int64_t in : {int64_t{17}, int64_t{255}}) {
      for (const int64_t out : {int64_t{5}, int64_t{130}, int64_t{300}}) {
        for (const bool accumulate : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "rows=" << rows << " in=" << in << " out=" << out
                                            << " accumulate=" << accumulate);
          const Case c = MakeCase(rng, rows, in, out);
          std::vector<float> y = c.y0;
          cpu::LinearBf16(c.x.data(), c.w.data() + 1, y.data(), rows, in, out, accumulate);
          ExpectWithinBound(c, y, rows, in, out, accumulate);
        }
      }
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
          cpu::LinearBf16Tiled(isa, c.x.data() + r * in, c.w.data() + 1, alone.data(), 1, in,
                               kOut, false);
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
