// Row invariance, bit for bit, for every linear kernel a decode, verify or prefill step runs: a
// row's outputs are the same bits whatever other rows share the call, how many there are, and
// how many threads compute it. Speculation is lossless only if a verified row gets a decode
// row's logits, and concurrency or prompt chunking can change no token only if a prefill row gets
// them too; a near-tie must never be decided by the rows beside it.
//
// Every variant this CPU runs (each weight format: BF16, f32, int8, int4; each activation mode:
// f32, BF16-rounded, int8-quantised) and the dispatched entry points the model calls, at 1-17
// rows and at counts that span several row blocks (row_blocks.h), odd input and output widths,
// on 1 and 2 threads. Rows are computed together, then each alone on one thread, then a
// subset out of order.

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "kernel_test_util.h"
#include "kernels/cpu/bf16_isa.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/gemm_int4.h"
#include "kernels/cpu/gemm_int8.h"

namespace dscale {
namespace {

using testing::RandomNormal;

// y[rows, out] = x[rows, in] · the case's weights (the weights are bound in).
using Product = std::function<void(const float* x, float* y, int64_t rows)>;

// The weights of one width in every format, from the same random values.
struct Weights {
  int64_t in = 0, out = 0;
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  std::vector<int8_t> int8;
  std::vector<cpu::Int8Scale> int8_scales;
  std::vector<uint8_t> int4;
  std::vector<cpu::Int8Scale> int4_scales;
};

Weights MakeWeights(std::mt19937& rng, int64_t in, int64_t out) {
  Weights w{.in = in, .out = out};
  w.f32 = RandomNormal(rng, out * in, 0.0f, 0.05f);
  w.bf16.resize(w.f32.size());
  for (size_t i = 0; i < w.f32.size(); ++i) w.bf16[i] = F32ToBf16(w.f32[i]);
  const int64_t groups = cpu::Int8Groups(in);
  w.int8.resize(out * in);
  w.int8_scales.resize(out * groups);
  cpu::QuantizeInt8Weights(w.f32.data(), out, in, w.int8.data(), w.int8_scales.data());
  w.int4.resize(out * cpu::Int4RowBytes(in));
  w.int4_scales.resize(out * groups);
  cpu::QuantizeInt4Weights(w.f32.data(), out, in, w.int4.data(), w.int4_scales.data());
  return w;
}

struct NamedProduct {
  std::string name;
  Product run;
};

// Every product this CPU can run on weights `w`: each variant alone, then the entry points the
// model calls (WeightMatrix's Project) in each activation mode.
std::vector<NamedProduct> Products(const Weights& w) {
  const int64_t in = w.in, out = w.out;
  std::vector<NamedProduct> all;
  for (const cpu::Bf16Isa isa : cpu::SupportedBf16Isas()) {
    const std::string name(cpu::Bf16IsaName(isa));
    all.push_back({"bf16 tiles " + name, [&w, isa, in, out](const float* x, float* y, int64_t n) {
                     cpu::LinearBf16Tiled(isa, x, w.bf16.data(), y, n, in, out, false);
                   }});
    all.push_back({"f32 tiles " + name, [&w, isa, in, out](const float* x, float* y, int64_t n) {
                     cpu::LinearF32Tiled(isa, x, w.f32.data(), y, n, in, out);
                   }});
    all.push_back({"int8 tiles " + name, [&w, isa, in, out](const float* x, float* y, int64_t n) {
                     cpu::LinearInt8Tiled(isa, x, w.int8.data(), w.int8_scales.data(), y, n, in,
                                          out, false);
                   }});
  }
  for (const cpu::Bf16DotIsa isa : cpu::SupportedBf16DotIsas()) {
    all.push_back({"bf16-activation tiles " + std::string(cpu::Bf16DotIsaName(isa)),
                   [&w, isa, in, out](const float* x, float* y, int64_t n) {
                     cpu::LinearBf16DotTiled(isa, x, w.bf16.data(), y, n, in, out, false);
                   }});
  }
  for (const cpu::Int8DotIsa isa : cpu::SupportedInt8DotIsas()) {
    all.push_back({"int8 dot " + std::string(cpu::Int8DotIsaName(isa)),
                   [&w, isa, in, out](const float* x, float* y, int64_t n) {
                     cpu::LinearInt8Dot(isa, x, w.int8.data(), w.int8_scales.data(), y, n, in, out,
                                        false);
                   }});
  }
  for (const auto activations : {cpu::Bf16Activations::kF32, cpu::Bf16Activations::kBf16}) {
    all.push_back({"LinearBf16 " + std::string(cpu::Bf16ActivationsName(activations)),
                   [&w, activations, in, out](const float* x, float* y, int64_t n) {
                     cpu::LinearBf16(x, w.bf16.data(), y, n, in, out, false, 0, activations);
                   }});
  }
  all.push_back({"Linear", [&w, in, out](const float* x, float* y, int64_t n) {
                   cpu::Linear(x, w.f32.data(), y, n, in, out);
                 }});
  for (const auto activations : {cpu::Int8Activations::kF32, cpu::Int8Activations::kInt8}) {
    const std::string mode(cpu::Int8ActivationsName(activations));
    all.push_back(
        {"LinearInt8 " + mode, [&w, activations, in, out](const float* x, float* y, int64_t n) {
           cpu::LinearInt8(x, w.int8.data(), w.int8_scales.data(), y, n, in, out, false, 0,
                           activations);
         }});
    all.push_back(
        {"LinearInt4 " + mode, [&w, activations, in, out](const float* x, float* y, int64_t n) {
           cpu::LinearInt4(x, w.int4.data(), w.int4_scales.data(), y, n, in, out, false, 0,
                           activations);
         }});
  }
  return all;
}

// Sets the OpenMP thread count for a scope.
class ThreadCount {
 public:
  explicit ThreadCount(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~ThreadCount() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

void ExpectSameBits(const float* got, const float* want, int64_t n, const std::string& what) {
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
        << what << ", output " << i << ": " << got[i] << " against " << want[i];
  }
}

// All `rows` rows in one call on `threads` threads, against each row alone on one thread, and
// against every third row (from the last, backwards) in one call.
void ExpectRowInvariant(const NamedProduct& product, const std::vector<float>& x, int64_t rows,
                        int64_t in, int64_t out, int threads) {
  std::vector<float> together(rows * out);
  {
    ThreadCount scope(threads);
    product.run(x.data(), together.data(), rows);
  }
  ThreadCount one(1);
  std::vector<float> alone(out);
  for (int64_t r = 0; r < rows; ++r) {
    product.run(x.data() + r * in, alone.data(), 1);
    ExpectSameBits(alone.data(), together.data() + r * out, out,
                   "row " + std::to_string(r) + " alone");
    if (::testing::Test::HasFatalFailure()) return;
  }
  std::vector<int64_t> picked;
  for (int64_t r = rows - 1; r >= 0; r -= 3) picked.push_back(r);
  std::vector<float> subset_x(picked.size() * in), subset_y(picked.size() * out);
  for (size_t i = 0; i < picked.size(); ++i) {
    std::copy_n(x.data() + picked[i] * in, in, subset_x.data() + i * in);
  }
  product.run(subset_x.data(), subset_y.data(), static_cast<int64_t>(picked.size()));
  for (size_t i = 0; i < picked.size(); ++i) {
    ExpectSameBits(subset_y.data() + i * out, together.data() + picked[i] * out, out,
                   "row " + std::to_string(picked[i]) + " among every third row");
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Every product at each width (in, out) and row count, on 1 and 2 threads.
void ExpectEveryProductRowInvariant(uint32_t seed,
                                    const std::vector<std::pair<int64_t, int64_t>>& widths,
                                    const std::vector<int64_t>& row_counts) {
  std::mt19937 rng(seed);
  for (const auto& [in, out] : widths) {
    const Weights w = MakeWeights(rng, in, out);
    for (const NamedProduct& product : Products(w)) {
      for (const int64_t rows : row_counts) {
        const std::vector<float> x = RandomNormal(rng, rows * in);
        for (const int threads : {1, 2}) {
          SCOPED_TRACE(::testing::Message() << product.name << " rows=" << rows << " in=" << in
                                            << " out=" << out << " threads=" << threads);
          ExpectRowInvariant(product, x, rows, in, out, threads);
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  }
}

// Every row count from 1 to 18 (decode of up to 18 requests; verify blocks of every length, in
// one to three tiles), odd widths.
TEST(RowInvarianceTest, EveryProductAtOneToEighteenRows) {
  std::vector<int64_t> rows(18);
  std::iota(rows.begin(), rows.end(), 1);
  ExpectEveryProductRowInvariant(54, {{17, 13}, {67, 37}, {1031, 21}}, rows);
}

// Row counts of many requests' verify blocks and of prefills: past every former tile limit
// (128-160 rows) and across two and three row blocks (row_blocks.h: at most 120 rows each),
// wide inputs (one- and two-row tiles then take four outputs per pass). 4,099 × 17 weights are
// past the kernels' threshold for splitting a call across threads (2^16), so the threads split
// these outputs.
TEST(RowInvarianceTest, EveryProductAtManyRowsAndWideInputs) {
  ExpectEveryProductRowInvariant(55, {{4099, 17}, {255, 70}}, {1, 2, 3, 25, 49, 133, 161, 241});
}

// No rows: every product returns without writing (a step may hand a kernel an empty block).
TEST(RowInvarianceTest, ZeroRowsWriteNothing) {
  std::mt19937 rng(56);
  const Weights w = MakeWeights(rng, 67, 13);
  const std::vector<float> x = RandomNormal(rng, 67);
  for (const NamedProduct& product : Products(w)) {
    std::vector<float> y(13, 42.0f);
    product.run(x.data(), y.data(), 0);
    EXPECT_EQ(y, std::vector<float>(13, 42.0f)) << product.name;
  }
}

}  // namespace
}  // namespace dscale
