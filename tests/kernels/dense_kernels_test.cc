// The dense CPU kernels (gemm, norms, RoPE, SwiGLU, embedding, softmax, argmax) against the
// double-precision reference kernels where the op table (op_parity_test.cc) does not reach:
// OpenBLAS's MatMul, in-place and strided calls, RoPE scalings and extreme positions, saturated
// gates, masked and vocabulary-sized softmax rows, ties, and bad ids.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/softmax.h"
#include "kernels/reference/reference_kernels.h"

namespace dscale {
namespace {

using testing::kElementwiseAbsTol;
using testing::kElementwiseRelTol;
using testing::kFloatEps;
using testing::kRmsEps;
using testing::kSoftmaxAbsTol;
using testing::kTestHeadDims;
using testing::kTestRows;
using testing::MaxAbsDiff;
using testing::MaxExcessOverRelative;
using testing::RandomNormal;

constexpr int64_t kHiddenSizes[] = {1, 17, 67, 255};

TEST(LinearTest, ZeroRowsIsANoOp) {
  const std::vector<float> w(6, 1.0f);
  float y = 42.0f;
  cpu::Linear(nullptr, w.data(), &y, 0, 3, 2);
  EXPECT_EQ(y, 42.0f);
}

TEST(MatMulTest, MatchesReferenceAtOddSizes) {
  std::mt19937 rng(111);
  for (const int64_t rows : kTestRows) {
    for (const int64_t in : {int64_t{1}, int64_t{67}, int64_t{4161}}) {
      for (const int64_t out : {int64_t{1}, int64_t{17}, int64_t{32}, int64_t{64}}) {
        SCOPED_TRACE(::testing::Message() << "rows=" << rows << " in=" << in << " out=" << out);
        const auto x = RandomNormal(rng, rows * in);
        const auto w = RandomNormal(rng, in * out);  // input-major [in, out]
        std::vector<float> y(rows * out, NAN), expected(rows * out);
        cpu::MatMul(x.data(), w.data(), y.data(), rows, in, out);
        ref::MatMul(x.data(), w.data(), expected.data(), rows, in, out);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t o = 0; o < out; ++o) {
            double mass = 0.0;
            for (int64_t i = 0; i < in; ++i) mass += std::fabs(x[r * in + i] * w[i * out + o]);
            ASSERT_LE(std::fabs(y[r * out + o] - expected[r * out + o]),
                      static_cast<double>(in) * kFloatEps * mass)
                << "r=" << r << " o=" << o;
          }
        }
      }
    }
  }
}

// aᵀ·b against the reference product of the transposed a, within the float dot product's bound.
TEST(MatMulTest, TransposedAMatchesReferenceAtOddSizes) {
  std::mt19937 rng(112);
  for (const int64_t k : {int64_t{1}, int64_t{67}, int64_t{1031}}) {
    for (const int64_t m : {int64_t{1}, int64_t{17}, int64_t{72}}) {
      for (const int64_t n : {int64_t{1}, int64_t{32}}) {
        SCOPED_TRACE(::testing::Message() << "k=" << k << " m=" << m << " n=" << n);
        const auto a = RandomNormal(rng, k * m);  // [k, m]
        const auto b = RandomNormal(rng, k * n);  // [k, n]
        std::vector<float> a_t(m * k), y(m * n, NAN), expected(m * n);
        for (int64_t i = 0; i < k; ++i) {
          for (int64_t r = 0; r < m; ++r) a_t[r * k + i] = a[i * m + r];
        }
        cpu::MatMulTransposedA(a.data(), b.data(), y.data(), k, m, n);
        ref::MatMul(a_t.data(), b.data(), expected.data(), m, k, n);
        for (int64_t r = 0; r < m; ++r) {
          for (int64_t o = 0; o < n; ++o) {
            double mass = 0.0;
            for (int64_t i = 0; i < k; ++i) mass += std::fabs(a[i * m + r] * b[i * n + o]);
            ASSERT_LE(std::fabs(y[r * n + o] - expected[r * n + o]),
                      static_cast<double>(k) * kFloatEps * mass)
                << "r=" << r << " o=" << o;
          }
        }
      }
    }
  }
}

TEST(RmsNormTest, MatchesReferenceAtOddSizes) {
  std::mt19937 rng(102);
  for (const int64_t rows : kTestRows) {
    for (const int64_t dim : {int64_t{1}, int64_t{17}, int64_t{67}, int64_t{255}, int64_t{4099}}) {
      SCOPED_TRACE(::testing::Message() << "rows=" << rows << " dim=" << dim);
      const auto x = RandomNormal(rng, rows * dim, 0.5f, 3.0f);
      const auto weight = RandomNormal(rng, dim, 1.0f, 0.2f);
      std::vector<float> y(x.size()), expected(x.size());
      cpu::RmsNorm(x.data(), weight.data(), y.data(), rows, dim, kRmsEps);
      ref::RmsNorm(x.data(), weight.data(), expected.data(), rows, dim, kRmsEps);
      EXPECT_LE(MaxExcessOverRelative(y, expected, kElementwiseRelTol), kElementwiseAbsTol);
      // In place (y aliases x) gives the same result.
      std::vector<float> in_place = x;
      cpu::RmsNorm(in_place.data(), weight.data(), in_place.data(), rows, dim, kRmsEps);
      EXPECT_EQ(MaxAbsDiff(in_place, y), 0.0);
    }
  }
}

TEST(HeadRmsNormTest, MatchesReferenceInsideWiderRows) {
  std::mt19937 rng(103);
  for (const int64_t rows : kTestRows) {
    for (const int64_t head_dim : kTestHeadDims) {
      for (const int64_t heads : {int64_t{1}, int64_t{4}}) {
        SCOPED_TRACE(::testing::Message()
                     << "rows=" << rows << " head_dim=" << head_dim << " heads=" << heads);
        // The heads sit at an offset inside a fused row with room for other projections; the
        // bytes around them must come back untouched.
        const int64_t offset = 3 * head_dim;
        const int64_t row_stride = offset + heads * head_dim + 11;
        const auto buffer = RandomNormal(rng, rows * row_stride, 0.0f, 2.0f);
        const auto weight = RandomNormal(rng, head_dim, 1.0f, 0.2f);
        std::vector<float> got = buffer, expected = buffer;
        cpu::HeadRmsNorm(got.data() + offset, weight.data(), rows, heads, head_dim, row_stride,
                         kRmsEps);
        ref::HeadRmsNorm(expected.data() + offset, weight.data(), rows, heads, head_dim, row_stride,
                         kRmsEps);
        EXPECT_LE(MaxExcessOverRelative(got, expected, kElementwiseRelTol), kElementwiseAbsTol);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t i = 0; i < row_stride; ++i) {
            if (i >= offset && i < offset + heads * head_dim) continue;
            ASSERT_EQ(got[r * row_stride + i], buffer[r * row_stride + i]) << r << "," << i;
          }
        }
      }
    }
  }
}

TEST(RopeTest, MatchesReferenceAtLargePositionsAndWideRows) {
  std::mt19937 rng(104);
  std::uniform_int_distribution<int32_t> position_dist(0, 40960);
  // Unscaled at two θ, and Llama 3.1's llama3 scaling (its wavelengths cross both bounds).
  const RopeScaling llama3 = {.type = RopeScalingType::kLlama3,
                              .factor = 8.0,
                              .low_freq_factor = 1.0,
                              .high_freq_factor = 4.0,
                              .original_max_position_embeddings = 8192};
  for (const RopeSpec& rope : {RopeSpec{.theta = 10000.0}, RopeSpec{.theta = 1000000.0},
                               RopeSpec{.theta = 500000.0, .scaling = llama3}}) {
    for (const int64_t rows : kTestRows) {
      for (const int64_t head_dim : kTestHeadDims) {
        SCOPED_TRACE(::testing::Message() << "theta=" << rope.theta << " scaled="
                                          << (rope.scaling.type != RopeScalingType::kNone)
                                          << " rows=" << rows << " head_dim=" << head_dim);
        const int64_t heads = 3;
        const int64_t row_stride = heads * head_dim + 7;
        std::vector<int32_t> positions(rows);
        for (auto& p : positions) p = position_dist(rng);
        positions[0] = 40000;
        if (rows > 1) positions[1] = 0;
        if (rows > 2) positions[2] = 131071;
        const auto buffer = RandomNormal(rng, rows * row_stride);
        std::vector<float> got = buffer, expected = buffer;
        cpu::ApplyRope(got.data(), positions.data(), rows, heads, head_dim, row_stride, rope);
        ref::ApplyRope(expected.data(), positions.data(), rows, heads, head_dim, row_stride, rope);
        EXPECT_LE(MaxAbsDiff(got, expected), kElementwiseAbsTol);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t i = heads * head_dim; i < row_stride; ++i) {
            ASSERT_EQ(got[r * row_stride + i], buffer[r * row_stride + i]);
          }
        }
      }
    }
  }
}

// Llama 3.1's frequencies (θ 500000, head_dim 128, factor 8, low 1, high 4, context 8192), worked
// out by hand in float64 from the definition: pair 0 and 20 below the high-frequency wavelength
// 2048 (kept), 29..34 on the ramp, 40 and 63 past 8192 (divided by 8). The same double
// operations in another order agree to a few ulps: 1e-14 relative.
TEST(RopeTest, Llama3FrequenciesMatchValuesWorkedOutByHand) {
  const RopeSpec rope = {.theta = 500000.0,
                         .scaling = {.type = RopeScalingType::kLlama3,
                                     .factor = 8.0,
                                     .low_freq_factor = 1.0,
                                     .high_freq_factor = 4.0,
                                     .original_max_position_embeddings = 8192}};
  const std::pair<int64_t, double> expected[] = {
      {0, 1.0},
      {20, 0.016560440080994446},
      {29, 0.002166570763503359},
      {32, 0.0005248461609929547},
      {34, 0.0001785078127679964},
      {40, 3.428102195952591e-05},
      {63, 3.068925988914511e-07},
  };
  for (const auto& [i, value] : expected) {
    EXPECT_NEAR(RopeInvFreq(rope, i, 128), value, 1e-14 * value) << "pair " << i;
  }
  // Unscaled, the definition is θ^(−2i/head_dim) bit for bit.
  EXPECT_EQ(RopeInvFreq(RopeSpec{.theta = 500000.0}, 40, 128), std::pow(500000.0, -80.0 / 128.0));
}

TEST(RopeTest, PositionZeroIsIdentityAndRotationKeepsPairNorms) {
  std::mt19937 rng(105);
  const int64_t head_dim = 64, half = head_dim / 2;
  const auto x = RandomNormal(rng, 2 * head_dim);
  const std::vector<int32_t> positions = {0, 40000};
  std::vector<float> y = x;
  cpu::ApplyRope(y.data(), positions.data(), 2, 1, head_dim, head_dim,
                 RopeSpec{.theta = 1000000.0});
  for (int64_t i = 0; i < head_dim; ++i) EXPECT_EQ(y[i], x[i]);
  for (int64_t i = 0; i < half; ++i) {
    const float* a = x.data() + head_dim;
    const float* b = y.data() + head_dim;
    EXPECT_NEAR(std::hypot(b[i], b[i + half]), std::hypot(a[i], a[i + half]), kElementwiseAbsTol);
  }
}

TEST(SwiGluTest, MatchesReferenceIncludingSaturatedGates) {
  std::mt19937 rng(106);
  for (const int64_t rows : kTestRows) {
    for (const int64_t inter : kHiddenSizes) {
      SCOPED_TRACE(::testing::Message() << "rows=" << rows << " inter=" << inter);
      auto gate_up = RandomNormal(rng, rows * 2 * inter, 0.0f, 4.0f);
      gate_up[0] = -120.0f;  // e^120 overflows float: silu must still come out as ≈ 0
      if (inter > 1) gate_up[1] = 95.0f;
      std::vector<float> got(rows * inter), expected(rows * inter);
      cpu::SwiGlu(gate_up.data(), got.data(), rows, inter);
      ref::SwiGlu(gate_up.data(), expected.data(), rows, inter);
      EXPECT_LE(MaxExcessOverRelative(got, expected, kElementwiseRelTol), kElementwiseAbsTol);
    }
  }
}

TEST(EmbeddingDeathTest, RejectsIdsOutsideTheTable) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::vector<float> table(4 * 3, 1.0f);
  std::vector<float> out(3);
  const int32_t too_big = 4, negative = -1;
  EXPECT_DEATH(cpu::EmbeddingGather(table.data(), 4, 3, &too_big, 1, out.data()), "CHECK failed");
  EXPECT_DEATH(cpu::EmbeddingGather(table.data(), 4, 3, &negative, 1, out.data()), "CHECK failed");
}

TEST(SoftmaxTest, MatchesReferenceWithLargeMagnitudeLogits) {
  std::mt19937 rng(108);
  for (const int64_t rows : kTestRows) {
    for (const int64_t n : {int64_t{1}, int64_t{17}, int64_t{255}, int64_t{4099}}) {
      for (const float magnitude : {1.0f, 30.0f, 1000.0f}) {
        SCOPED_TRACE(::testing::Message()
                     << "rows=" << rows << " n=" << n << " magnitude=" << magnitude);
        // Offset far from 0 as well: a naive e^x would overflow (or underflow to 0/0).
        auto x = RandomNormal(rng, rows * n, 5000.0f, magnitude);
        if (n > 1) x[1] = -std::numeric_limits<float>::infinity();  // a masked logit
        std::vector<float> got = x, expected = x;
        cpu::SoftmaxRows(got.data(), rows, n);
        ref::SoftmaxRows(expected.data(), rows, n);
        EXPECT_LE(MaxAbsDiff(got, expected), kSoftmaxAbsTol);
        if (n > 1) {
          EXPECT_EQ(got[1], 0.0f);
        }
        for (int64_t r = 0; r < rows; ++r) {
          double sum = 0.0;
          for (int64_t i = 0; i < n; ++i) sum += got[r * n + i];
          ASSERT_NEAR(sum, 1.0, kElementwiseRelTol) << "row " << r;
        }
      }
    }
  }
}

TEST(SoftmaxTest, VocabularySizedRowsMatchReference) {
  std::mt19937 rng(110);
  const int64_t rows = 3, n = 151936;
  const auto x = RandomNormal(rng, rows * n, 0.0f, 4.0f);
  std::vector<float> got = x, expected = x;
  cpu::SoftmaxRows(got.data(), rows, n);
  ref::SoftmaxRows(expected.data(), rows, n);
  // Relative to each probability: a wrong normalisation shows up even where p is tiny.
  EXPECT_LE(MaxExcessOverRelative(got, expected, kElementwiseRelTol), 0.0);
}

// ShiftedExpMoments: each term e^(x − shift) is within a few float ulps (the vector exp) and the
// float lanes add at most 32 terms before folding into double, so both sums agree with the
// double reference to 1e-6 relative to the sum of their terms' magnitudes.
TEST(ShiftedExpMomentsTest, MatchesReferenceAtOddSizesAndShifts) {
  std::mt19937 rng(112);
  for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{17}, int64_t{4099}, int64_t{151936}}) {
    for (const float stddev : {0.5f, 4.0f, 40.0f}) {
      const auto x = RandomNormal(rng, n, -3.0f, stddev);
      const float max = *std::max_element(x.begin(), x.end());
      for (const float extra : {0.0f, 2.5f}) {
        SCOPED_TRACE(::testing::Message()
                     << "n=" << n << " stddev=" << stddev << " extra=" << extra);
        const cpu::ExpMoments got = cpu::ShiftedExpMoments(x.data(), n, max + extra);
        const cpu::ExpMoments want = ref::ShiftedExpMoments(x.data(), n, max + extra);
        double weighted_mass = 0.0;
        for (const float v : x) {
          const double shifted = static_cast<double>(v) - (max + extra);
          weighted_mass += std::exp(shifted) * std::fabs(shifted);
        }
        EXPECT_NEAR(got.sum, want.sum, 1e-6 * want.sum);
        EXPECT_NEAR(got.weighted, want.weighted, 1e-6 * weighted_mass + 1e-30);
      }
    }
  }
}

// LargestValues: exactly the sorted reference's first values, for counts up to the maximum, at
// sizes around the vector blocks, with repeated values, −inf entries, and rising rows (where
// every block holds a new value).
TEST(LargestValuesTest, EqualsTheSortedReferenceExactly) {
  std::mt19937 rng(113);
  for (const int64_t n : {int64_t{1}, int64_t{16}, int64_t{17}, int64_t{63}, int64_t{65},
                          int64_t{4099}, int64_t{151936}}) {
    for (const int count : {1, 2, 16, 64}) {
      if (count > n) continue;
      auto noise = RandomNormal(rng, n, 0.0f, 4.0f);
      auto repeated = noise;
      for (float& v : repeated) v = std::round(v);  // many equal values
      auto masked = noise;
      for (int64_t i = 0; i < n; i += 3) masked[i] = -std::numeric_limits<float>::infinity();
      std::vector<float> rising(n);
      for (int64_t i = 0; i < n; ++i) rising[i] = static_cast<float>(i) * 0.5f - 7.0f;
      for (const auto* x : {&noise, &repeated, &masked, &rising}) {
        SCOPED_TRACE(::testing::Message() << "n=" << n << " count=" << count);
        std::vector<float> got(count), want(count);
        cpu::LargestValues(x->data(), n, count, got.data());
        ref::LargestValues(x->data(), n, count, want.data());
        EXPECT_EQ(got, want);
      }
    }
  }
}

TEST(ArgmaxTest, MatchesReferenceOnRandomRows) {
  std::mt19937 rng(109);
  for (const int64_t rows : kTestRows) {
    for (const int64_t n : {int64_t{1}, int64_t{17}, int64_t{255}, int64_t{151937}}) {
      if (rows * n > 4'000'000) continue;
      const auto x = RandomNormal(rng, rows * n, 0.0f, 10.0f);
      std::vector<int32_t> got(rows), expected(rows);
      cpu::ArgmaxRows(x.data(), rows, n, got.data());
      ref::ArgmaxRows(x.data(), rows, n, expected.data());
      EXPECT_EQ(got, expected) << "rows=" << rows << " n=" << n;
    }
  }
}

TEST(ArgmaxTest, TiesGoToTheLowestIndex) {
  const int64_t n = 37;
  std::vector<float> x(4 * n, -1.0f);
  // Row 0: maximum at 5, 9 and the last index. Row 1: all equal. Row 2: tie at 0 and 36.
  // Row 3: −inf everywhere but two equal finite values at 12 and 30.
  x[0 * n + 5] = x[0 * n + 9] = x[0 * n + n - 1] = 3.5f;
  x[2 * n + 0] = x[2 * n + n - 1] = 2.0f;
  for (int64_t i = 0; i < n; ++i) x[3 * n + i] = -std::numeric_limits<float>::infinity();
  x[3 * n + 12] = x[3 * n + 30] = -7.0f;
  std::vector<int32_t> got(4), expected(4);
  cpu::ArgmaxRows(x.data(), 4, n, got.data());
  ref::ArgmaxRows(x.data(), 4, n, expected.data());
  EXPECT_EQ(got, (std::vector<int32_t>{5, 0, 0, 12}));
  EXPECT_EQ(got, expected);
}

}  // namespace
}  // namespace dscale
