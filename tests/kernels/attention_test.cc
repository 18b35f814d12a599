// Paged attention: the tiled online-softmax kernel against the row-by-row reference, over packed
// ragged batches with shuffled, non-contiguous pages, causal and non-causal, every tile height,
// with f32 K/V and with BF16 K/V in every widening variant the CPU has.

#include "kernels/cpu/attention.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "kernel_test_util.h"
#include "kernels/reference/reference_kernels.h"

namespace dscale {
namespace {

using testing::MaxAbsDiff;
using testing::RandomNormal;

// With q, k, v ~ N(0, 1) and scale 1/sqrt(head_dim) every output is a convex combination of
// value entries of order 1; float scores, exponentials and sums stay within a few 1e-7 of the
// double reference, so 1e-5 leaves room without hiding a wrong mask or a wrong page.
constexpr double kAttentionAbsTol = 1e-5;
// Tile heights only change which rows share a pass over the keys, never the arithmetic of a
// row or its order (a row is one lane of the same vector code whatever its tile), so the
// heights agree bit for bit on any CPU.
constexpr double kTileAgreementAbsTol = 0;
// The ISA variants run each lane's arithmetic in the same order. Where the build's vectors fuse
// a·b + c into one FMA, as the AVX-512 copy does (the Release flags target x86-64-v3), they give
// the same bits; sanitizer and debug builds target plain x86-64, without FMA, and round the
// product and the sum separately, so there the variants agree only as far as each agrees with
// the reference.
#if defined(__FMA__)
constexpr double kIsaAgreementAbsTol = 0;
#else
constexpr double kIsaAgreementAbsTol = 2 * kAttentionAbsTol;
#endif
// The known-answer check of the reference: a double-precision mean of a few float values.
constexpr double kKnownAnswerAbsTol = 1e-6;

struct SpanShape {
  int32_t ctx_len;
  int32_t q_len;
};

// A packed batch over a paged cache: spans' rows back to back, each span's pages drawn from a
// shuffled pool (so consecutive logical pages are rarely consecutive physical pages), unused
// spare pages in the pool, q rows inside wider fused-QKV rows.
class PagedBatch {
 public:
  PagedBatch(const std::vector<SpanShape>& shapes, int32_t heads, int32_t kv_heads,
             int32_t head_dim, int32_t page_size, bool causal, uint32_t seed)
      : rng_(seed) {
    int32_t rows = 0, pages = 0;
    for (const SpanShape& s : shapes) {
      rows += s.q_len;
      pages += (s.ctx_len + s.q_len + page_size - 1) / page_size;
    }
    const int32_t pool_pages = pages + 3;
    std::vector<int32_t> pool(pool_pages);
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng_);
    page_tables_.resize(shapes.size());
    spans_.resize(shapes.size());
    int32_t next_row = 0, next_page = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const int32_t span_pages = (shapes[i].ctx_len + shapes[i].q_len + page_size - 1) / page_size;
      page_tables_[i].assign(pool.begin() + next_page, pool.begin() + next_page + span_pages);
      next_page += span_pages;
      spans_[i] = {next_row, shapes[i].q_len, shapes[i].ctx_len,
                   page_tables_[i].empty() ? nullptr : page_tables_[i].data()};
      next_row += shapes[i].q_len;
    }
    const int64_t q_stride = static_cast<int64_t>(heads + 2 * kv_heads) * head_dim;
    const int64_t kv_values = static_cast<int64_t>(pool_pages) * page_size * kv_heads * head_dim;
    q_ = RandomNormal(rng_, rows * q_stride);
    k_ = RandomNormal(rng_, kv_values);
    v_ = RandomNormal(rng_, kv_values);
    rows_ = rows;
    params_.q = q_.data();
    params_.q_row_stride = q_stride;
    params_.heads = heads;
    params_.kv_heads = kv_heads;
    params_.head_dim = head_dim;
    params_.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    params_.causal = causal;
    params_.spans = spans_.data();
    params_.num_spans = static_cast<int32_t>(spans_.size());
    params_.kv = {k_.data(), v_.data(), page_size};
  }

  // Output of `attend(params)`, pre-filled with NaN so a row the kernel never writes shows up.
  // `bf16`: the params carry the BF16 copies of K and V (RoundKvToBf16) instead of the f32 ones.
  template <typename Attend>
  std::vector<float> Run(Attend attend, bool bf16 = false) {
    std::vector<float> out(static_cast<size_t>(rows_) * params_.heads * params_.head_dim,
                           std::numeric_limits<float>::quiet_NaN());
    cpu::AttentionParams p = params_;
    p.out = out.data();
    if (bf16) {
      EXPECT_EQ(k_bf16_.size(), k_.size()) << "RoundKvToBf16 first";
      p.kv = {.page_size = p.kv.page_size, .k_bf16 = k_bf16_.data(), .v_bf16 = v_bf16_.data()};
    }
    attend(p);
    return out;
  }

  // Keeps BF16 copies of K and V (rounded to nearest even) and replaces the f32 values by their
  // exact widening, so f32 and BF16 runs attend over the same numbers.
  void RoundKvToBf16() {
    for (auto [f32, bf16] : {std::pair{&k_, &k_bf16_}, {&v_, &v_bf16_}}) {
      bf16->resize(f32->size());
      for (size_t i = 0; i < f32->size(); ++i) {
        (*bf16)[i] = F32ToBf16((*f32)[i]);
        (*f32)[i] = Bf16ToF32((*bf16)[i]);
      }
    }
  }

  // Attention under a sliding window of `window` positions (cpu/attention.h; 0: none).
  void set_window(int32_t window) { params_.window = window; }

  std::vector<float>& values() { return v_; }
  std::vector<float>& keys() { return k_; }
  const std::vector<StepSpan>& spans() const { return spans_; }

 private:
  std::mt19937 rng_;
  std::vector<std::vector<int32_t>> page_tables_;
  std::vector<StepSpan> spans_;
  std::vector<float> q_, k_, v_;
  std::vector<uint16_t> k_bf16_, v_bf16_;
  int32_t rows_ = 0;
  cpu::AttentionParams params_;
};

// Checks every compiled tile height against the reference and against each other.
void ExpectAllTilesMatchReference(PagedBatch& batch) {
  const auto expected = batch.Run([](const cpu::AttentionParams& p) { ref::PagedAttention(p); });
  std::vector<float> first;
  for (const int tile : cpu::kAttentionTileHeights) {
    SCOPED_TRACE(::testing::Message() << "tile=" << tile);
    const auto got =
        batch.Run([tile](const cpu::AttentionParams& p) { cpu::PagedAttention(p, tile); });
    EXPECT_LE(MaxAbsDiff(got, expected), kAttentionAbsTol);
    if (first.empty()) {
      first = got;
    } else {
      EXPECT_LE(MaxAbsDiff(got, first), kTileAgreementAbsTol);
    }
  }
}

// BF16 K/V: every tile height in every ISA variant against the reference on the same BF16
// values (which it widens exactly), and bit for bit what the same variant gives on f32 rows
// holding the widened values — the widening is exact and the arithmetic after it is the f32
// path's. The variants themselves run the same per-lane arithmetic in different vector widths
// (AVX-512: 16 lanes, the others the build's): they agree within kIsaAgreementAbsTol.
void ExpectBf16KvMatchesReferenceInEveryIsa(PagedBatch& batch) {
  batch.RoundKvToBf16();
  const auto reference = [](const cpu::AttentionParams& p) { ref::PagedAttention(p); };
  const auto expected = batch.Run(reference, /*bf16=*/true);
  EXPECT_EQ(MaxAbsDiff(batch.Run(reference), expected), 0.0) << "the reference widens exactly";
  for (const int tile : cpu::kAttentionTileHeights) {
    std::vector<float> first_variant;
    for (const cpu::Bf16Isa isa : cpu::SupportedBf16Isas()) {
      SCOPED_TRACE(::testing::Message() << "tile=" << tile << " isa=" << cpu::Bf16IsaName(isa));
      const auto attend = [tile, isa](const cpu::AttentionParams& p) {
        cpu::PagedAttention(p, tile, isa);
      };
      const auto f32 = batch.Run(attend);
      const auto got = batch.Run(attend, /*bf16=*/true);
      EXPECT_LE(MaxAbsDiff(got, expected), kAttentionAbsTol);
      EXPECT_EQ(MaxAbsDiff(got, f32), 0.0);
      if (first_variant.empty()) {
        first_variant = f32;
      } else {
        EXPECT_LE(MaxAbsDiff(f32, first_variant), kIsaAgreementAbsTol);
      }
    }
  }
}

// A packed batch mixing decode (q_len 1), verification-sized (3, 16, 19) and prefill-sized (133)
// spans, with and without prior context, plus an empty span in the middle.
const std::vector<SpanShape> kMixedBatch = {{0, 19}, {37, 1},  {0, 1},   {100, 3},
                                            {16, 0}, {64, 16}, {21, 133}};

// (head_dim, heads per kv head, causal, page_size)
using AttentionCase = std::tuple<int32_t, int32_t, bool, int32_t>;

std::string CaseName(const ::testing::TestParamInfo<AttentionCase>& info) {
  const auto [head_dim, group, causal, page_size] = info.param;
  return "hd" + std::to_string(head_dim) + "_group" + std::to_string(group) +
         (causal ? "_causal" : "_block") + "_page" + std::to_string(page_size);
}

class PagedAttentionParityTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(PagedAttentionParityTest, AllTileHeightsMatchReference) {
  const auto [head_dim, group, causal, page_size] = GetParam();
  const int32_t kv_heads = 2;
  PagedBatch batch(kMixedBatch, kv_heads * group, kv_heads, head_dim, page_size, causal,
                   static_cast<uint32_t>(1000 + head_dim * 7 + group * 3 + page_size));
  ExpectAllTilesMatchReference(batch);
}

TEST_P(PagedAttentionParityTest, Bf16KvMatchesReferenceInEveryIsa) {
  const auto [head_dim, group, causal, page_size] = GetParam();
  const int32_t kv_heads = 2;
  PagedBatch batch(kMixedBatch, kv_heads * group, kv_heads, head_dim, page_size, causal,
                   static_cast<uint32_t>(2000 + head_dim * 7 + group * 3 + page_size));
  ExpectBf16KvMatchesReferenceInEveryIsa(batch);
}

INSTANTIATE_TEST_SUITE_P(Kernels, PagedAttentionParityTest,
                         ::testing::Combine(::testing::Values(32, 64, 128),
                                            ::testing::Values(1, 2, 3, 4), ::testing::Bool(),
                                            ::testing::Values(16, 5)),
                         CaseName);

TEST(PagedAttentionTest, LongContextsSpanManyKeyChunks) {
  for (const bool causal : {true, false}) {
    SCOPED_TRACE(::testing::Message() << "causal=" << causal);
    PagedBatch batch({{700, 16}, {0, 1}, {333, 3}, {129, 19}}, 4, 2, 128, 16, causal, 2024);
    ExpectAllTilesMatchReference(batch);
    ExpectBf16KvMatchesReferenceInEveryIsa(batch);
  }
}

// Sliding windows (the draft layers of newer DFlash drafters), causal and not: windows of one
// position, shorter than a block, longer than a key chunk, and wider than any context, so some
// tiles hold rows that see nothing of the first chunks.
TEST(PagedAttentionTest, SlidingWindowsMatchReference) {
  for (const bool causal : {true, false}) {
    for (const int32_t window : {1, 3, 17, 130, 5000}) {
      SCOPED_TRACE(::testing::Message() << "causal=" << causal << " window=" << window);
      PagedBatch batch({{700, 16}, {0, 1}, {333, 3}, {129, 19}, {5, 133}}, 4, 2, 36, 16, causal,
                       static_cast<uint32_t>(7 + window));
      batch.set_window(window);
      ExpectAllTilesMatchReference(batch);
      ExpectBf16KvMatchesReferenceInEveryIsa(batch);
    }
  }
}

// head_dims that are not a multiple of the vector width take the narrower value blocks and the
// scalar leftovers (of the BF16 widening too).
TEST(PagedAttentionTest, UnusualHeadDimsMatchReference) {
  for (const int32_t head_dim : {4, 20, 36, 72}) {
    for (const bool causal : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "head_dim=" << head_dim << " causal=" << causal);
      PagedBatch batch({{5, 19}, {40, 3}, {0, 1}}, 6, 2, head_dim, 5, causal, 31 + head_dim);
      ExpectAllTilesMatchReference(batch);
      ExpectBf16KvMatchesReferenceInEveryIsa(batch);
    }
  }
}

// A decode row (read in place from the cache) and the same row inside a verification span
// (whose chunks are copied to scratch first) score and sum in the same order, so they give the
// same bits: the speculative and the plain decoder see the same logits.
TEST(PagedAttentionTest, RowAloneMatchesRowInsideSpanBitForBit) {
  for (const int32_t head_dim : {32, 36, 128}) {
    for (const int32_t group : {1, 2, 4}) {
      SCOPED_TRACE(::testing::Message() << "head_dim=" << head_dim << " group=" << group);
      const int32_t ctx = 45, rows = 16;
      PagedBatch batch({{ctx, rows}}, 2 * group, 2, head_dim, 16, /*causal=*/true,
                       static_cast<uint32_t>(300 + head_dim + group));
      batch.RoundKvToBf16();
      const int64_t row_values = int64_t{2} * group * head_dim;
      for (const bool bf16 : {false, true}) {
        for (const cpu::Bf16Isa isa : cpu::SupportedBf16Isas()) {
          const auto span_out = batch.Run(
              [isa](const cpu::AttentionParams& p) { cpu::PagedAttention(p, 16, isa); }, bf16);
          for (const int32_t j : {0, 1, 7, rows - 1}) {
            const StepSpan whole = batch.spans()[0];
            const StepSpan alone{whole.q_start + j, 1, ctx + j, whole.page_table};
            const auto alone_out = batch.Run(
                [&](cpu::AttentionParams p) {
                  p.spans = &alone;
                  p.num_spans = 1;
                  cpu::PagedAttention(p, 16, isa);
                },
                bf16);
            for (int64_t i = 0; i < row_values; ++i) {
              const int64_t at = (whole.q_start + j) * row_values + i;
              ASSERT_EQ(std::bit_cast<uint32_t>(alone_out[at]),
                        std::bit_cast<uint32_t>(span_out[at]))
                  << "row " << j << " value " << i << " bf16=" << bf16
                  << " isa=" << cpu::Bf16IsaName(isa);
            }
          }
        }
      }
    }
  }
}

// Row invariance across the batch: a span's rows get the same bits in a packed batch of other
// requests (decode, verify and prefill spans) as alone, and a causal row the same bits as when
// it is its span's only row — at every tile height, in every widening variant, f32 and BF16
// K/V, on 1 and 2 threads. The speculative and plain decoders, any concurrency and any prompt
// chunking then see the same attention outputs (tests/kernels/row_invariance_test.cc covers the
// products).
TEST(PagedAttentionTest, ARowsBitsDoNotDependOnTheBatchTileOrThreads) {
  const int saved_threads = omp_get_max_threads();
  for (const bool causal : {true, false}) {
    PagedBatch batch(kMixedBatch, 4, 2, 36, 16, causal, causal ? 401u : 402u);
    batch.RoundKvToBf16();
    const int64_t row_values = int64_t{4} * 36;
    for (const bool bf16 : {false, true}) {
      for (const cpu::Bf16Isa isa : cpu::SupportedBf16Isas()) {
        for (const int tile : cpu::kAttentionTileHeights) {
          for (const int threads : {1, 2}) {
            SCOPED_TRACE(::testing::Message() << "causal=" << causal << " bf16=" << bf16
                                              << " isa=" << cpu::Bf16IsaName(isa)
                                              << " tile=" << tile << " threads=" << threads);
            omp_set_num_threads(threads);
            const auto attend = [tile, isa](const cpu::AttentionParams& p) {
              cpu::PagedAttention(p, tile, isa);
            };
            const auto packed = batch.Run(attend, bf16);
            omp_set_num_threads(1);
            const auto expect_same = [&](const StepSpan& alone, int64_t first_row) {
              const auto out = batch.Run(
                  [&](cpu::AttentionParams p) {
                    p.spans = &alone;
                    p.num_spans = 1;
                    attend(p);
                  },
                  bf16);
              for (int64_t i = first_row * row_values; i < (first_row + alone.q_len) * row_values;
                   ++i) {
                ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(packed[i]))
                    << "row " << i / row_values << " value " << i % row_values;
              }
            };
            for (const StepSpan& span : batch.spans()) {
              if (span.q_len == 0) continue;
              expect_same(span, span.q_start);
              if (!causal) continue;
              for (const int32_t j : {0, span.q_len / 2, span.q_len - 1}) {
                expect_same({span.q_start + j, 1, span.ctx_len + j, span.page_table},
                            span.q_start + j);
              }
            }
          }
        }
      }
    }
  }
  omp_set_num_threads(saved_threads);
}

// The reference is the specification, so check it against a case with a known answer: when
// every key is identical all scores tie and each row averages the values it can see.
TEST(PagedAttentionTest, ReferenceAveragesVisibleValuesWhenKeysTie) {
  const int32_t head_dim = 32, page_size = 5;
  for (const bool causal : {true, false}) {
    for (const int32_t window : {0, 3}) {
      PagedBatch batch({{6, 4}, {0, 3}}, 2, 1, head_dim, page_size, causal, 77);
      batch.set_window(window);
      std::fill(batch.keys().begin(), batch.keys().end(), 0.25f);
      const auto out = batch.Run([](const cpu::AttentionParams& p) { ref::PagedAttention(p); });
      for (const StepSpan& span : batch.spans()) {
        for (int32_t j = 0; j < span.q_len; ++j) {
          int32_t visible = causal ? span.ctx_len + j + 1 : span.ctx_len + span.q_len;
          int32_t first = 0;
          if (window > 0) {
            // Row j at position ctx_len + j sees the positions less than `window` away.
            first = std::max(0, span.ctx_len + j - window + 1);
            visible = std::min(visible, span.ctx_len + j + window);
          }
          for (int32_t h = 0; h < 2; ++h) {
            for (int32_t d = 0; d < head_dim; ++d) {
              double mean = 0.0;
              for (int32_t pos = first; pos < visible; ++pos) {
                const int64_t slot =
                    int64_t{span.page_table[pos / page_size]} * page_size + pos % page_size;
                mean += batch.values()[slot * head_dim + d];
              }
              mean /= visible - first;
              ASSERT_NEAR(out[(span.q_start + j) * 2 * head_dim + h * head_dim + d], mean,
                          kKnownAnswerAbsTol);
            }
          }
        }
      }
    }
  }
}

TEST(PagedAttentionDeathTest, RejectsUncompiledTileHeights) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  PagedBatch batch({{0, 1}}, 1, 1, 32, 16, true, 5);
  EXPECT_DEATH(batch.Run([](const cpu::AttentionParams& p) { cpu::PagedAttention(p, 32); }),
               "CHECK failed");
}

TEST(PagedAttentionDeathTest, NeedsExactlyOneKvPair) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  PagedBatch batch({{0, 1}}, 1, 1, 32, 16, true, 5);
  batch.RoundKvToBf16();
  const std::vector<uint16_t> bits(16 * 32);
  EXPECT_DEATH(batch.Run([&](cpu::AttentionParams p) {
    p.kv.k_bf16 = bits.data();  // the f32 pair is set too
    p.kv.v_bf16 = bits.data();
    cpu::PagedAttention(p, 16);
  }),
               "either the f32 or the BF16 K/V rows");
}

}  // namespace
}  // namespace dscale
