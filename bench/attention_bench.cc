// Paged attention throughput by tile height, for the two shapes the tile router chooses between:
// verification (many short spans over a long context) and prefill (one long span, no context);
// and decoding (one row per span over a long context), where reading K/V is the cost, with f32
// and BF16 K/V. Items are query rows (all heads of a row count as one item); bytes are the K/V
// rows read once per call.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/attention.h"

namespace dscale {
namespace {

constexpr int32_t kHeads = 16;
constexpr int32_t kKvHeads = 8;
constexpr int32_t kHeadDim = 128;
constexpr int32_t kPageSize = 16;

// `num_spans` spans of `q_len` rows each after `ctx_len` cached positions, pages interleaved
// across spans the way a shared pool hands them out; K/V also kept as BF16.
class AttentionFixture {
 public:
  AttentionFixture(int32_t num_spans, int32_t q_len, int32_t ctx_len) {
    const int32_t pages_per_span = (ctx_len + q_len + kPageSize - 1) / kPageSize;
    const int32_t pages = num_spans * pages_per_span;
    std::vector<int32_t> pool(pages);
    std::iota(pool.begin(), pool.end(), 0);
    std::mt19937 rng(7);
    std::shuffle(pool.begin(), pool.end(), rng);
    page_tables_.resize(num_spans);
    for (int32_t s = 0; s < num_spans; ++s) {
      page_tables_[s].assign(pool.begin() + s * pages_per_span,
                             pool.begin() + (s + 1) * pages_per_span);
      spans_.push_back({s * q_len, q_len, ctx_len, page_tables_[s].data()});
    }
    rows_ = num_spans * q_len;
    std::normal_distribution<float> dist;
    const int64_t q_stride = static_cast<int64_t>(kHeads + 2 * kKvHeads) * kHeadDim;
    q_.resize(rows_ * q_stride);
    k_.resize(static_cast<int64_t>(pages) * kPageSize * kKvHeads * kHeadDim);
    v_.resize(k_.size());
    out_.resize(static_cast<int64_t>(rows_) * kHeads * kHeadDim);
    for (auto* buffer : {&q_, &k_, &v_}) {
      for (float& x : *buffer) x = dist(rng);
    }
    k_bf16_.resize(k_.size());
    v_bf16_.resize(v_.size());
    for (size_t i = 0; i < k_.size(); ++i) {
      k_bf16_[i] = F32ToBf16(k_[i]);
      v_bf16_[i] = F32ToBf16(v_[i]);
    }
    kv_elements_ = int64_t{2} * num_spans * (ctx_len + q_len) * kKvHeads * kHeadDim;
    params_ = {q_.data(),
               q_stride,
               out_.data(),
               kHeads,
               kKvHeads,
               kHeadDim,
               1.0f / std::sqrt(static_cast<float>(kHeadDim)),
               true,
               spans_.data(),
               num_spans,
               {k_.data(), v_.data(), kPageSize}};
  }

  // The params over f32 K/V, or over their BF16 copies.
  cpu::AttentionParams params(bool bf16) const {
    cpu::AttentionParams p = params_;
    if (bf16) p.kv = {.page_size = kPageSize, .k_bf16 = k_bf16_.data(), .v_bf16 = v_bf16_.data()};
    return p;
  }
  int64_t rows() const { return rows_; }
  // K and V elements every call reads.
  int64_t kv_elements() const { return kv_elements_; }

 private:
  std::vector<std::vector<int32_t>> page_tables_;
  std::vector<StepSpan> spans_;
  std::vector<float> q_, k_, v_, out_;
  std::vector<uint16_t> k_bf16_, v_bf16_;
  int64_t rows_ = 0;
  int64_t kv_elements_ = 0;
  cpu::AttentionParams params_;
};

// range(0): the tile height; range(1): 1 for BF16 K/V, 0 for f32.
void Run(benchmark::State& state, const AttentionFixture& fixture) {
  const int tile = static_cast<int>(state.range(0));
  const bool bf16 = state.range(1) != 0;
  const cpu::AttentionParams params = fixture.params(bf16);
  for (auto _ : state) {
    cpu::PagedAttention(params, tile);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * fixture.rows());
  state.SetBytesProcessed(state.iterations() * fixture.kv_elements() * (bf16 ? 2 : 4));
}

// 32 spans × 16 draft rows verified against 512 cached positions each.
void BM_AttentionVerify(benchmark::State& state) {
  static const AttentionFixture fixture(32, 16, 512);
  Run(state, fixture);
}

// One 512-row prompt, causal, no prior context.
void BM_AttentionPrefill(benchmark::State& state) {
  static const AttentionFixture fixture(1, 512, 0);
  Run(state, fixture);
}

// 16 requests decoding one row each after 2048 cached positions (256 MiB of f32 K/V per call,
// 128 MiB as BF16: far past the caches, so the call streams K/V from memory).
void BM_AttentionDecode(benchmark::State& state) {
  static const AttentionFixture fixture(16, 1, 2048);
  Run(state, fixture);
}

// One request decoding one row after 512 cached positions: a plain decode step's attention in
// one layer (2 MiB of BF16 K/V, cache-resident when repeated: this is the arithmetic and
// bookkeeping of a step, not its memory traffic).
void BM_AttentionDecodeOne(benchmark::State& state) {
  static const AttentionFixture fixture(1, 1, 512);
  Run(state, fixture);
}

BENCHMARK(BM_AttentionVerify)
    ->ArgNames({"tile", "bf16"})
    ->ArgsProduct({{16, 128}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_AttentionPrefill)
    ->ArgNames({"tile", "bf16"})
    ->ArgsProduct({{16, 128}, {0}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_AttentionDecode)
    ->ArgNames({"tile", "bf16"})
    ->ArgsProduct({{16}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_AttentionDecodeOne)
    ->ArgNames({"tile", "bf16"})
    ->ArgsProduct({{16}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace dscale

BENCHMARK_MAIN();
