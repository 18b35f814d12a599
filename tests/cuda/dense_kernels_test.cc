// Parity of the dense CUDA kernels (gemm, norms, RoPE, SwiGLU, embedding, softmax, argmax) with
// the CPU kernels, at odd sizes. Every test skips where no CUDA device is usable.

#include <cublas_v2.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/softmax.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/softmax.h"
#include "kernels/kernel_test_util.h"

namespace dscale {
namespace {

using testing::CudaTest;
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
constexpr int64_t kRowLengths[] = {1, 17, 255, 1024, 4099};

class CudaDenseKernelTest : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    DSCALE_CUBLAS_CHECK(cuda::Cublas().create(&blas_));
  }
  void TearDown() override {
    if (blas_ != nullptr) DSCALE_CUBLAS_CHECK(cuda::Cublas().destroy(blas_));
    CudaTest::TearDown();
  }

  cublasHandle_t blas_ = nullptr;
};

// |gpu − cpu| ≤ 2·(in + 1)·ε·(Σ_i |x_i·w_i| + |y0| when accumulating), element by element.
void ExpectLinearClose(const std::vector<float>& gpu, const std::vector<float>& cpu,
                       const std::vector<float>& x, const std::vector<float>& w,
                       const std::vector<float>& y0, int64_t rows, int64_t in, int64_t out,
                       bool accumulate) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double mass = accumulate ? std::fabs(y0[r * out + o]) : 0.0;
      for (int64_t i = 0; i < in; ++i) mass += std::fabs(x[r * in + i] * w[o * in + i]);
      // Each side is within (in + 1)·ε·Σ|x_i·w_i| of the exact product, so the two are within
      // twice that of each other.
      const double bound = 2.0 * static_cast<double>(in + 1) * kFloatEps * mass;
      ASSERT_LE(std::fabs(gpu[r * out + o] - cpu[r * out + o]), bound) << "r=" << r << " o=" << o;
    }
  }
}

TEST_F(CudaDenseKernelTest, LinearMatchesCpuAtOddSizes) {
  std::mt19937 rng(201);
  for (const int64_t rows : kTestRows) {
    for (const int64_t in : kHiddenSizes) {
      for (const int64_t out : kHiddenSizes) {
        for (const bool accumulate : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "rows=" << rows << " in=" << in << " out=" << out
                                            << " accumulate=" << accumulate);
          const auto x = RandomNormal(rng, rows * in);
          const auto w = RandomNormal(rng, out * in);
          const auto y0 = RandomNormal(rng, rows * out);
          auto dx = ToDevice(x), dw = ToDevice(w), dy = ToDevice(y0);
          cuda::Linear(blas_, dx.data(), dw.data(), dy.data(), rows, in, out, accumulate, stream_);
          std::vector<float> expected = y0;
          cpu::Linear(x.data(), w.data(), expected.data(), rows, in, out, accumulate);
          ExpectLinearClose(ToHost(dy), expected, x, w, y0, rows, in, out, accumulate);
        }
      }
    }
  }
}

TEST_F(CudaDenseKernelTest, LinearWithEmptyInnerDimensionZeroesOrKeeps) {
  const std::vector<float> y0 = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
  for (const bool accumulate : {false, true}) {
    auto dy = ToDevice(y0);
    cuda::Linear(blas_, nullptr, nullptr, dy.data(), 3, 0, 2, accumulate, stream_);
    EXPECT_EQ(ToHost(dy), accumulate ? y0 : std::vector<float>(6, 0.0f));
  }
}

TEST_F(CudaDenseKernelTest, RmsNormMatchesCpuInAndOutOfPlace) {
  std::mt19937 rng(202);
  for (const int64_t rows : kTestRows) {
    for (const int64_t dim : kRowLengths) {
      SCOPED_TRACE(::testing::Message() << "rows=" << rows << " dim=" << dim);
      const auto x = RandomNormal(rng, rows * dim, 0.5f, 3.0f);
      const auto weight = RandomNormal(rng, dim);
      std::vector<float> expected(x.size());
      cpu::RmsNorm(x.data(), weight.data(), expected.data(), rows, dim, kRmsEps);
      auto dx = ToDevice(x), dw = ToDevice(weight);
      cuda::DeviceBuffer<float> dy(x.size());
      cuda::RmsNorm(dx.data(), dw.data(), dy.data(), rows, dim, kRmsEps, stream_);
      EXPECT_LE(MaxExcessOverRelative(ToHost(dy), expected, kElementwiseRelTol),
                kElementwiseAbsTol);
      cuda::RmsNorm(dx.data(), dw.data(), dx.data(), rows, dim, kRmsEps, stream_);
      EXPECT_LE(MaxExcessOverRelative(ToHost(dx), expected, kElementwiseRelTol),
                kElementwiseAbsTol);
    }
  }
}

TEST_F(CudaDenseKernelTest, HeadRmsNormMatchesCpuInsideWiderRows) {
  std::mt19937 rng(203);
  const int64_t heads = 3;
  for (const int64_t rows : kTestRows) {
    for (const int64_t head_dim : kTestHeadDims) {
      SCOPED_TRACE(::testing::Message() << "rows=" << rows << " head_dim=" << head_dim);
      // The heads sit after one head's worth of other values inside a wider fused row; the
      // values outside the heads must come through untouched.
      const int64_t row_stride = (heads + 3) * head_dim + 5;
      auto x = RandomNormal(rng, rows * row_stride, 0.0f, 2.0f);
      const auto weight = RandomNormal(rng, head_dim);
      auto dx = ToDevice(x), dw = ToDevice(weight);
      cuda::HeadRmsNorm(dx.data() + head_dim, dw.data(), rows, heads, head_dim, row_stride, kRmsEps,
                        stream_);
      cpu::HeadRmsNorm(x.data() + head_dim, weight.data(), rows, heads, head_dim, row_stride,
                       kRmsEps);
      EXPECT_LE(MaxExcessOverRelative(ToHost(dx), x, kElementwiseRelTol), kElementwiseAbsTol);
    }
  }
}

TEST_F(CudaDenseKernelTest, RopeMatchesCpuAtLargePositions) {
  std::mt19937 rng(204);
  std::uniform_int_distribution<int32_t> position(0, 40000);
  const int64_t heads = 5;
  const RopeScaling llama3 = {.type = RopeScalingType::kLlama3,
                              .factor = 8.0,
                              .low_freq_factor = 1.0,
                              .high_freq_factor = 4.0,
                              .original_max_position_embeddings = 8192};
  for (const RopeSpec& rope :
       {RopeSpec{.theta = 1e6}, RopeSpec{.theta = 500000.0, .scaling = llama3}}) {
    for (const int64_t rows : kTestRows) {
      for (const int64_t head_dim : kTestHeadDims) {
        SCOPED_TRACE(::testing::Message()
                     << "rows=" << rows << " head_dim=" << head_dim << " theta=" << rope.theta);
        const int64_t row_stride = heads * head_dim + 7;
        auto x = RandomNormal(rng, rows * row_stride);
        std::vector<int32_t> positions(rows);
        for (int32_t& p : positions) p = position(rng);
        auto dx = ToDevice(x);
        auto dpos = ToDevice(positions);
        cuda::ApplyRope(dx.data(), dpos.data(), rows, heads, head_dim, row_stride, rope, stream_);
        cpu::ApplyRope(x.data(), positions.data(), rows, heads, head_dim, row_stride, rope);
        EXPECT_LE(MaxExcessOverRelative(ToHost(dx), x, kElementwiseRelTol), kElementwiseAbsTol);
      }
    }
  }
}

TEST_F(CudaDenseKernelTest, SwiGluMatchesCpuOverWideGateRange) {
  std::mt19937 rng(205);
  for (const int64_t rows : kTestRows) {
    for (const int64_t inter : kRowLengths) {
      SCOPED_TRACE(::testing::Message() << "rows=" << rows << " inter=" << inter);
      // Gates out to ±~100: saturated σ on both sides, silu → −0 far below zero.
      const auto gate_up = RandomNormal(rng, rows * 2 * inter, 0.0f, 30.0f);
      std::vector<float> expected(rows * inter);
      cpu::SwiGlu(gate_up.data(), expected.data(), rows, inter);
      auto dgu = ToDevice(gate_up);
      cuda::DeviceBuffer<float> dout(expected.size());
      cuda::SwiGlu(dgu.data(), dout.data(), rows, inter, stream_);
      EXPECT_LE(MaxExcessOverRelative(ToHost(dout), expected, kElementwiseRelTol),
                kElementwiseAbsTol);
    }
  }
}

TEST_F(CudaDenseKernelTest, EmbeddingGatherCopiesRowsExactly) {
  std::mt19937 rng(206);
  const int64_t vocab = 301;
  std::uniform_int_distribution<int32_t> token(0, vocab - 1);
  for (const int64_t rows : kTestRows) {
    for (const int64_t dim : kHiddenSizes) {
      SCOPED_TRACE(::testing::Message() << "rows=" << rows << " dim=" << dim);
      const auto table = RandomNormal(rng, vocab * dim);
      std::vector<int32_t> ids(rows);
      for (int32_t& id : ids) id = token(rng);
      ids[0] = static_cast<int32_t>(vocab - 1);  // the last row of the table
      std::vector<float> expected(rows * dim);
      cpu::EmbeddingGather(table.data(), vocab, dim, ids.data(), rows, expected.data());
      auto dtable = ToDevice(table);
      auto dids = ToDevice(ids);
      cuda::DeviceBuffer<float> dout(expected.size());
      cuda::EmbeddingGather(dtable.data(), vocab, dim, dids.data(), rows, dout.data(), stream_);
      EXPECT_EQ(ToHost(dout), expected);
    }
  }
}

TEST_F(CudaDenseKernelTest, SoftmaxMatchesCpuWithMaskedAndLargeLogits) {
  std::mt19937 rng(207);
  for (const int64_t rows : kTestRows) {
    for (const int64_t n : {int64_t{1}, int64_t{17}, int64_t{1000}, int64_t{32771}}) {
      SCOPED_TRACE(::testing::Message() << "rows=" << rows << " n=" << n);
      auto x = RandomNormal(rng, rows * n, 50.0f, 20.0f);  // far from 0: needs the max shift
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t i = 1; i < n; i += 3) x[r * n + i] = -std::numeric_limits<float>::infinity();
      }
      auto dx = ToDevice(x);
      cuda::SoftmaxRows(dx.data(), rows, n, stream_);
      cpu::SoftmaxRows(x.data(), rows, n);
      EXPECT_LE(MaxAbsDiff(ToHost(dx), x), kSoftmaxAbsTol);
    }
  }
}

TEST_F(CudaDenseKernelTest, ArgmaxMatchesCpuAndBreaksTiesLow) {
  std::mt19937 rng(208);
  for (const int64_t rows : kTestRows) {
    for (const int64_t n : {int64_t{1}, int64_t{17}, int64_t{1000}, int64_t{151936}}) {
      SCOPED_TRACE(::testing::Message() << "rows=" << rows << " n=" << n);
      auto x = RandomNormal(rng, rows * n);
      // Row r's maximum appears twice (three times from n ≥ 3): the lowest index must win,
      // wherever the copies fall among the threads' slices.
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t first = (r * 7919) % n;
        for (const int64_t at : {first, (first + n / 2) % n, n - 1}) x[r * n + at] = 9.0f;
      }
      std::vector<int32_t> expected(rows);
      cpu::ArgmaxRows(x.data(), rows, n, expected.data());
      auto dx = ToDevice(x);
      cuda::DeviceBuffer<int32_t> dout(rows);
      cuda::ArgmaxRows(dx.data(), rows, n, dout.data(), stream_);
      EXPECT_EQ(ToHost(dout), expected);
    }
  }
}

TEST_F(CudaDenseKernelTest, ArgmaxOfAllEqualOrNegativeInfinityRowsIsZero) {
  const float inf = std::numeric_limits<float>::infinity();
  const int64_t n = 777;
  std::vector<float> x(3 * n, 0.5f);
  std::fill(x.begin() + n, x.begin() + 2 * n, -inf);
  x[2 * n + 700] = inf;
  auto dx = ToDevice(x);
  cuda::DeviceBuffer<int32_t> dout(3);
  cuda::ArgmaxRows(dx.data(), 3, n, dout.data(), stream_);
  EXPECT_EQ(ToHost(dout), (std::vector<int32_t>{0, 0, 700}));
}

}  // namespace
}  // namespace dscale
