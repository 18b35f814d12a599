// Paged attention on the device against the CPU kernel: packed ragged batches over shuffled,
// non-contiguous pages, causal and non-causal, GQA groups 1/2/4, every tile height. Every test
// that needs the device skips where no CUDA device is usable.

#include "kernels/cuda/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/kernel_test_util.h"

namespace dscale {
namespace {

using testing::CudaTest;
using testing::MaxAbsDiff;
using testing::RandomNormal;

// q, k, v ~ N(0, 1) with scale 1/sqrt(head_dim): outputs are convex combinations of values of
// order 1, and both kernels stay within a few 1e-7 of the exact result.
constexpr double kAttentionAbsTol = 1e-5;
// The tile height only decides which rows share a block; each row's arithmetic (chunk
// boundaries included) is the same, so the heights must agree far more closely.
constexpr double kTileAgreementAbsTol = 1e-6;

struct SpanShape {
  int32_t ctx_len;
  int32_t q_len;
};

// A packed batch over a paged cache, built on the host (for the CPU kernel) and copied to the
// device. Each span's pages come from a shuffled pool with spare pages, and the q rows sit
// inside wider fused-QKV rows.
class AttentionBatch {
 public:
  AttentionBatch(const std::vector<SpanShape>& shapes, int32_t heads, int32_t kv_heads,
                 int32_t head_dim, int32_t page_size, bool causal, uint32_t seed) {
    std::mt19937 rng(seed);
    const int32_t pool_pages = AssignPages(shapes, page_size, rng) + 3;
    const int64_t q_stride = int64_t{heads + 2 * kv_heads} * head_dim;
    const int64_t kv_values = int64_t{pool_pages} * page_size * kv_heads * head_dim;
    q_ = RandomNormal(rng, rows_ * q_stride);
    k_ = RandomNormal(rng, kv_values);
    v_ = RandomNormal(rng, kv_values);
    params_.q_row_stride = q_stride;
    params_.heads = heads;
    params_.kv_heads = kv_heads;
    params_.head_dim = head_dim;
    params_.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    params_.causal = causal;
    params_.num_spans = static_cast<int32_t>(spans_.size());
    params_.kv.page_size = page_size;
  }

  int32_t max_q_len() const { return max_q_len_; }

  std::vector<float> RunCpu() {
    std::vector<float> out(OutputSize(), std::numeric_limits<float>::quiet_NaN());
    std::vector<StepSpan> spans = spans_;
    for (size_t i = 0; i < spans.size(); ++i) spans[i].page_table = pages_.data() + page_offset_[i];
    cpu::AttentionParams p = params_;
    p.q = q_.data();
    p.out = out.data();
    p.spans = spans.data();
    p.kv.k = k_.data();
    p.kv.v = v_.data();
    cpu::PagedAttention(p, cpu::kAttentionTileHeights[0]);
    return out;
  }

  // The device kernel's output (NaN where it wrote nothing); waits for the stream.
  std::vector<float> RunCuda(int tile_rows, int32_t max_q_len, cudaStream_t stream) {
    cuda::DeviceBuffer<float> q(q_.data(), q_.size()), k(k_.data(), k_.size()),
        v(v_.data(), v_.size());
    cuda::DeviceBuffer<int32_t> pages(pages_.data(), pages_.size());
    std::vector<StepSpan> spans = spans_;
    for (size_t i = 0; i < spans.size(); ++i) spans[i].page_table = pages.data() + page_offset_[i];
    cuda::DeviceBuffer<StepSpan> device_spans(spans.data(), spans.size());
    std::vector<float> out(OutputSize(), std::numeric_limits<float>::quiet_NaN());
    cuda::DeviceBuffer<float> device_out(out.data(), out.size());
    cuda::AttentionParams p = params_;
    p.q = q.data();
    p.out = device_out.data();
    p.spans = device_spans.data();
    p.kv.k = k.data();
    p.kv.v = v.data();
    cuda::PagedAttention(p, max_q_len, tile_rows, stream);
    DSCALE_CUDA_CHECK(cudaStreamSynchronize(stream));
    device_out.CopyToHost(out.data());
    return out;
  }

 private:
  // Lays the spans' rows back to back and deals each span its pages from a shuffled pool;
  // returns how many pages the spans use.
  int32_t AssignPages(const std::vector<SpanShape>& shapes, int32_t page_size, std::mt19937& rng) {
    int32_t used = 0;
    for (const SpanShape& s : shapes) used += (s.ctx_len + s.q_len + page_size - 1) / page_size;
    pages_.resize(used + 3);
    std::iota(pages_.begin(), pages_.end(), 0);
    std::shuffle(pages_.begin(), pages_.end(), rng);
    int32_t next_page = 0;
    for (const SpanShape& s : shapes) {
      spans_.push_back({rows_, s.q_len, s.ctx_len, nullptr});
      page_offset_.push_back(next_page);
      next_page += (s.ctx_len + s.q_len + page_size - 1) / page_size;
      rows_ += s.q_len;
      max_q_len_ = std::max(max_q_len_, s.q_len);
    }
    return used;
  }

  size_t OutputSize() const {
    return static_cast<size_t>(rows_) * params_.heads * params_.head_dim;
  }

  std::vector<StepSpan> spans_;            // page_table unset: filled per run
  std::vector<int32_t> page_offset_;       // span i's table starts at pages_[page_offset_[i]]
  std::vector<int32_t> pages_;
  std::vector<float> q_, k_, v_;
  int32_t rows_ = 0;
  int32_t max_q_len_ = 0;
  cpu::AttentionParams params_;
};

// Every compiled tile height against the CPU kernel and against each other.
void ExpectAllTilesMatchCpu(AttentionBatch& batch, cudaStream_t stream) {
  const std::vector<float> expected = batch.RunCpu();
  std::vector<float> first;
  for (const int tile : cuda::kAttentionTileHeights) {
    SCOPED_TRACE(::testing::Message() << "tile=" << tile);
    const std::vector<float> got = batch.RunCuda(tile, batch.max_q_len(), stream);
    EXPECT_LE(MaxAbsDiff(got, expected), kAttentionAbsTol);
    if (first.empty()) {
      first = got;
    } else {
      EXPECT_LE(MaxAbsDiff(got, first), kTileAgreementAbsTol);
    }
  }
}

// Decode (q_len 1), verification-sized (3, 7, 16, 19) and prefill-sized (133) spans, with and
// without prior context, plus an empty span in the middle.
const std::vector<SpanShape> kMixedBatch = {{0, 19}, {37, 1}, {0, 1},   {100, 3},
                                            {16, 0}, {5, 7},  {64, 16}, {21, 133}};

// (head_dim, heads per kv head, causal, page_size)
using AttentionCase = std::tuple<int32_t, int32_t, bool, int32_t>;

std::string CaseName(const ::testing::TestParamInfo<AttentionCase>& info) {
  const auto [head_dim, group, causal, page_size] = info.param;
  return "hd" + std::to_string(head_dim) + "_group" + std::to_string(group) +
         (causal ? "_causal" : "_block") + "_page" + std::to_string(page_size);
}

class CudaPagedAttentionParityTest : public CudaTest,
                                     public ::testing::WithParamInterface<AttentionCase> {};

TEST_P(CudaPagedAttentionParityTest, AllTileHeightsMatchCpu) {
  const auto [head_dim, group, causal, page_size] = GetParam();
  const int32_t kv_heads = 2;
  AttentionBatch batch(kMixedBatch, kv_heads * group, kv_heads, head_dim, page_size, causal,
                       static_cast<uint32_t>(3000 + head_dim * 7 + group * 3 + page_size));
  ExpectAllTilesMatchCpu(batch, stream_);
}

INSTANTIATE_TEST_SUITE_P(Kernels, CudaPagedAttentionParityTest,
                         ::testing::Combine(::testing::Values(32, 64, 128),
                                            ::testing::Values(1, 2, 4), ::testing::Bool(),
                                            ::testing::Values(16, 5)),
                         CaseName);

class CudaPagedAttentionTest : public CudaTest {};

TEST_F(CudaPagedAttentionTest, LongContextsSpanManyKeyChunks) {
  for (const bool causal : {true, false}) {
    SCOPED_TRACE(::testing::Message() << "causal=" << causal);
    AttentionBatch batch({{700, 16}, {0, 1}, {333, 3}, {129, 19}, {1000, 133}}, 4, 2, 128, 16,
                         causal, 4044);
    ExpectAllTilesMatchCpu(batch, stream_);
  }
}

// head_dims that are not a multiple of the warp width leave some lanes idle in every phase.
TEST_F(CudaPagedAttentionTest, UnusualHeadDimsMatchCpu) {
  for (const int32_t head_dim : {4, 20, 36, 72}) {
    for (const bool causal : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "head_dim=" << head_dim << " causal=" << causal);
      AttentionBatch batch({{5, 19}, {40, 3}, {0, 1}, {3, 133}}, 6, 2, head_dim, 5, causal,
                           51 + head_dim);
      ExpectAllTilesMatchCpu(batch, stream_);
    }
  }
}

// A max_q_len above the longest span only adds blocks that exit at once.
TEST_F(CudaPagedAttentionTest, LargerMaxQLenChangesNothing) {
  AttentionBatch batch({{9, 7}, {0, 3}}, 4, 4, 64, 16, true, 99);
  const std::vector<float> expected = batch.RunCuda(16, batch.max_q_len(), stream_);
  EXPECT_EQ(batch.RunCuda(16, 300, stream_), expected);
}

// Nothing to attend: the output is left as it was (NaN here).
TEST_F(CudaPagedAttentionTest, ZeroMaxQLenWritesNothing) {
  AttentionBatch batch({{9, 7}}, 2, 1, 32, 16, false, 7);
  for (const float value : batch.RunCuda(64, 0, stream_)) ASSERT_TRUE(std::isnan(value));
}

// The launcher validates its parameters on the host before anything reaches the device, so
// these run without a GPU too.
cuda::AttentionParams ValidShape() {
  cuda::AttentionParams p;
  p.heads = 4;
  p.kv_heads = 2;
  p.head_dim = 32;
  p.q_row_stride = 4 * 32;
  p.scale = 1.0f;
  p.kv.page_size = 16;
  return p;
}

TEST(CudaPagedAttentionDeathTest, RejectsUncompiledTileHeights) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(cuda::PagedAttention(ValidShape(), 1, 32, nullptr), "CHECK failed");
}

TEST(CudaPagedAttentionDeathTest, RejectsHeadsNotAMultipleOfKvHeads) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  cuda::AttentionParams p = ValidShape();
  p.heads = 3;
  p.q_row_stride = 3 * 32;
  EXPECT_DEATH(cuda::PagedAttention(p, 1, 16, nullptr), "CHECK failed");
}

}  // namespace
}  // namespace dscale
