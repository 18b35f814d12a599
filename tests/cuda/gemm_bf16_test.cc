// The BF16-weight GEMM, the f32 → BF16 rounding and the BF16 embedding gather against the CPU
// kernels on BF16-rounded values. Every test skips where no CUDA device is usable.

#include "kernels/cuda/gemm_bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "cuda/cuda_test_util.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/embedding.h"
#include "kernels/kernel_test_util.h"

namespace dscale {
namespace {

using testing::CudaTest;
using testing::kFloatEps;
using testing::kTestRows;
using testing::RandomNormal;

// BF16 keeps 8 significant bits: rounding to nearest moves a value by at most 2⁻⁸ of itself.
constexpr double kBf16UnitRoundoff = 1.0 / 256.0;
constexpr int64_t kInnerSizes[] = {1, 17, 67, 255, 1024};
constexpr int64_t kOuterSizes[] = {1, 5, 33, 130};

std::vector<float> RoundedToBf16(const std::vector<float>& values) {
  std::vector<float> rounded(values.size());
  for (size_t i = 0; i < values.size(); ++i) rounded[i] = Bf16ToF32(F32ToBf16(values[i]));
  return rounded;
}

std::vector<cuda::Bf16> Bf16Bits(const std::vector<float>& values) {
  std::vector<cuda::Bf16> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i].bits = F32ToBf16(values[i]);
  return bits;
}

// mass[r, o] = Σ_i |x[r, i]·w[o, i]| (+ |y0[r, o]| when accumulating), the scale of every
// rounding bound below.
std::vector<double> ProductMass(const std::vector<float>& x, const std::vector<float>& w,
                                const std::vector<float>& y0, int64_t rows, int64_t in, int64_t out,
                                bool accumulate) {
  std::vector<double> mass(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double m = accumulate ? std::fabs(y0[r * out + o]) : 0.0;
      for (int64_t i = 0; i < in; ++i) m += std::fabs(double{x[r * in + i]} * w[o * in + i]);
      mass[r * out + o] = m;
    }
  }
  return mass;
}

// The GEMM is only ever created after the fixture's device check passed.
class CudaBf16GemmTest : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    gemm_ = std::make_unique<cuda::GemmContext>();
  }
  void TearDown() override {
    gemm_.reset();
    CudaTest::TearDown();
  }

  std::vector<float> DeviceLinear(const std::vector<float>& x, const std::vector<float>& w,
                                  const std::vector<float>& y0, int64_t rows, int64_t in,
                                  int64_t out, bool accumulate) {
    auto dx = ToDevice(x);
    cuda::DeviceBuffer<cuda::Bf16> dx16(x.size());
    cuda::ConvertToBf16(dx.data(), dx16.data(), static_cast<int64_t>(x.size()), stream_);
    auto dw = ToDevice(Bf16Bits(w));
    auto dy = ToDevice(y0);
    cuda::LinearBf16(*gemm_, dx16.data(), dw.data(), dy.data(), rows, in, out, accumulate, stream_);
    return ToHost(dy);
  }

  std::unique_ptr<cuda::GemmContext> gemm_;
};

TEST_F(CudaBf16GemmTest, ConvertToBf16GivesTheHostRoundingBitForBit) {
  std::mt19937 rng(301);
  std::vector<float> x = RandomNormal(rng, 4099, 0.0f, 100.0f);
  // Ties (exactly half a BF16 step, both parities), signed zeros, subnormals, the largest
  // finite value (rounds to infinity), infinities and NaNs of both signs.
  const float specials[] = {1.0f + 1.0f / 256.0f,
                            1.0f + 3.0f / 256.0f,
                            0.0f,
                            -0.0f,
                            1e-40f,
                            -3e-45f,
                            std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN()};
  x.insert(x.end(), std::begin(specials), std::end(specials));
  auto dx = ToDevice(x);
  cuda::DeviceBuffer<cuda::Bf16> dout(x.size());
  cuda::ConvertToBf16(dx.data(), dout.data(), static_cast<int64_t>(x.size()), stream_);
  const std::vector<cuda::Bf16> got = ToHost(dout);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(got[i].bits, F32ToBf16(x[i])) << "i=" << i << " x=" << x[i];
  }
}

// Against the CPU's f32 Linear on the same BF16-rounded x and w. Products of BF16 values are
// exact in f32, so only the f32 sums differ: the CPU is within (in + 1)·ε·mass of the exact
// result (the classical dot-product bound); tensor-core accumulation may truncate rather than
// round, at most 2ε per addition, so the device is within 2·(in + 1)·ε·mass. 4·(in + 1)·ε·mass
// covers both; a wrong transpose, a missed accumulate or BF16 outputs land far outside.
TEST_F(CudaBf16GemmTest, LinearMatchesCpuOnBf16RoundedInputs) {
  std::mt19937 rng(302);
  for (const int64_t rows : kTestRows) {
    for (const int64_t in : kInnerSizes) {
      for (const int64_t out : kOuterSizes) {
        for (const bool accumulate : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "rows=" << rows << " in=" << in << " out=" << out
                                            << " accumulate=" << accumulate);
          const auto x = RandomNormal(rng, rows * in);
          const auto w = RoundedToBf16(RandomNormal(rng, out * in, 0.0f, 0.1f));
          const auto y0 = RandomNormal(rng, rows * out);
          const std::vector<float> got = DeviceLinear(x, w, y0, rows, in, out, accumulate);
          const std::vector<float> x16 = RoundedToBf16(x);
          std::vector<float> expected = y0;
          cpu::Linear(x16.data(), w.data(), expected.data(), rows, in, out, accumulate);
          const auto mass = ProductMass(x16, w, y0, rows, in, out, accumulate);
          for (size_t e = 0; e < got.size(); ++e) {
            const double bound = 4.0 * static_cast<double>(in + 1) * kFloatEps * mass[e];
            ASSERT_LE(std::fabs(double{got[e]} - expected[e]), bound) << "element " << e;
          }
        }
      }
    }
  }
}

// Against the CPU's f32 Linear on unrounded f32 activations (the CPU forward's numbers): the
// device's rounding of x to BF16 moves each product by at most 2⁻⁸ of itself, so the outputs
// differ by at most 2⁻⁸·mass on top of the accumulation bound above. This is the price of the
// BF16 activations the device forward feeds its GEMMs.
TEST_F(CudaBf16GemmTest, LinearStaysWithinBf16RoundingOfF32Activations) {
  std::mt19937 rng(303);
  const int64_t rows = 19, in = 1024, out = 130;
  const auto x = RandomNormal(rng, rows * in);
  const auto w = RoundedToBf16(RandomNormal(rng, out * in, 0.0f, 0.03f));
  const std::vector<float> y0(static_cast<size_t>(rows * out), 0.0f);
  const std::vector<float> got = DeviceLinear(x, w, y0, rows, in, out, false);
  std::vector<float> expected(y0.size());
  cpu::Linear(x.data(), w.data(), expected.data(), rows, in, out, false);
  const auto mass = ProductMass(x, w, y0, rows, in, out, false);
  for (size_t e = 0; e < got.size(); ++e) {
    const double bound =
        (kBf16UnitRoundoff + 4.0 * static_cast<double>(in + 1) * kFloatEps) * mass[e];
    ASSERT_LE(std::fabs(double{got[e]} - expected[e]), bound) << "element " << e;
  }
}

TEST_F(CudaBf16GemmTest, LinearWithEmptyInnerDimensionZeroesOrKeeps) {
  const std::vector<float> y0 = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
  for (const bool accumulate : {false, true}) {
    auto dy = ToDevice(y0);
    cuda::LinearBf16(*gemm_, nullptr, nullptr, dy.data(), 3, 0, 2, accumulate, stream_);
    EXPECT_EQ(ToHost(dy), accumulate ? y0 : std::vector<float>(6, 0.0f));
  }
}

TEST_F(CudaBf16GemmTest, EmbeddingGatherBf16WidensRowsExactly) {
  std::mt19937 rng(304);
  const int64_t vocab = 301, dim = 67;
  std::uniform_int_distribution<int32_t> token(0, vocab - 1);
  const auto table = RoundedToBf16(RandomNormal(rng, vocab * dim));
  auto dtable = ToDevice(Bf16Bits(table));
  for (const int64_t rows : kTestRows) {
    SCOPED_TRACE(::testing::Message() << "rows=" << rows);
    std::vector<int32_t> ids(static_cast<size_t>(rows));
    for (int32_t& id : ids) id = token(rng);
    auto dids = ToDevice(ids);
    cuda::DeviceBuffer<float> dout(static_cast<size_t>(rows * dim));
    cuda::EmbeddingGatherBf16(dtable.data(), vocab, dim, dids.data(), rows, dout.data(), stream_);
    std::vector<float> expected(dout.size());
    cpu::EmbeddingGather(table.data(), vocab, dim, ids.data(), rows, expected.data());
    EXPECT_EQ(ToHost(dout), expected);
  }
}

}  // namespace
}  // namespace dscale
