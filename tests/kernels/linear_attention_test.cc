// The Gated DeltaNet kernels' row invariance, bit for bit: a span's outputs and the state it
// leaves are the same bits however its rows are split into calls (a decode row at a time, a
// verify block, a prompt chunk, a replay of kept rows, segments ending at captured states), on
// one thread or two, and in either vector width of the delta rule's column blocks. Speculation on
// a hybrid target is lossless only so. Parity with the float64 reference at odd sizes is the op
// table's (op_parity_test.cc).

#include "kernels/cpu/linear_attention.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/cpu_isa_cap.h"
#include "kernels/cpu/delta_rule.h"

namespace dscale {
namespace {

using testing::RandomNormal;

// A span of rows for the delta rule: value_dim 83 crosses a whole block of either width (16 or
// 64 columns), a vector and single columns; 70 rows cross the rows prepared at once (64).
struct DeltaCase {
  int64_t rows = 70, key_heads = 2, value_heads = 4, key_dim = 20, value_dim = 83;
  std::vector<float> qk, vba, a_log, dt_bias, state;

  int64_t qk_stride() const { return 2 * key_heads * key_dim; }
  int64_t v_width() const { return value_heads * value_dim; }
  int64_t vba_stride() const { return v_width() + 2 * value_heads; }

  DeltaCase() {
    std::mt19937 rng(7);
    qk = RandomNormal(rng, rows * qk_stride(), 0.0f, 1.0f);
    vba = RandomNormal(rng, rows * vba_stride(), 0.0f, 1.0f);
    a_log = RandomNormal(rng, value_heads, -0.5f, 0.5f);
    dt_bias = RandomNormal(rng, value_heads, 0.0f, 0.5f);
    state = RandomNormal(rng, value_heads * key_dim * value_dim, 0.0f, 0.5f);
  }

  // Rows [first, first + count) from `state_in`, into out [rows, v_width] at the same rows.
  void Run(int64_t first, int64_t count, float* state_in, float* out,
           cpu::DeltaRuleVectors vectors) const {
    cpu::GatedDeltaRuleIn({.qk = qk.data() + first * qk_stride(),
                           .qk_stride = qk_stride(),
                           .v = vba.data() + first * vba_stride(),
                           .v_stride = vba_stride(),
                           .ba = vba.data() + first * vba_stride() + v_width(),
                           .ba_stride = vba_stride(),
                           .a_log = a_log.data(),
                           .dt_bias = dt_bias.data(),
                           .state = state_in,
                           .out = out + first * v_width(),
                           .out_stride = v_width(),
                           .rows = count,
                           .key_heads = key_heads,
                           .value_heads = value_heads,
                           .key_dim = key_dim,
                           .value_dim = value_dim},
                          vectors);
  }
};

struct DeltaResult {
  std::vector<float> out, state;
  bool operator==(const DeltaResult&) const = default;
};

// The case's rows in calls of `pieces` rows (the last piece takes what is left).
DeltaResult RunInPieces(const DeltaCase& c, const std::vector<int64_t>& pieces, int threads,
                        cpu::DeltaRuleVectors vectors) {
  DeltaResult result{.out = std::vector<float>(static_cast<size_t>(c.rows * c.v_width())),
                     .state = c.state};
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  int64_t first = 0;
  for (size_t i = 0; first < c.rows; ++i) {
    const int64_t count = i < pieces.size() ? std::min(pieces[i], c.rows - first) : c.rows - first;
    c.Run(first, count, result.state.data(), result.out.data(), vectors);
    first += count;
  }
  omp_set_num_threads(before);
  return result;
}

cpu::DeltaRuleVectors BestVectors() {
  return cpu::CpuFeaturesInUse().Avx512() ? cpu::DeltaRuleVectors::kAvx512
                                          : cpu::DeltaRuleVectors::kBuild;
}

TEST(GatedDeltaRuleTest, ASpanSplitAnywhereGivesTheBitsOfOneCall) {
  const DeltaCase c;
  const cpu::DeltaRuleVectors vectors = BestVectors();
  const DeltaResult whole = RunInPieces(c, {c.rows}, 2, vectors);
  EXPECT_TRUE(whole == RunInPieces(c, {c.rows}, 1, vectors)) << "one thread";
  EXPECT_TRUE(whole == RunInPieces(c, {1, 5, 11, 2}, 2, vectors)) << "pieces of 1, 5, 11, 2, 51";
  EXPECT_TRUE(whole == RunInPieces(c, std::vector<int64_t>(c.rows, 1), 2, vectors))
      << "a row at a time";
  EXPECT_TRUE(whole == RunInPieces(c, {16, 16, 16, 16}, 1, vectors)) << "blocks of 16, 1 thread";
}

// The same bits in both widths where the build's vectors fuse a multiply-add as AVX-512's do (the
// Release build's x86-64-v3); a build for plain x86-64 (sanitizers, debug) rounds the product and
// the sum apart, and its widths agree to rounding only. A process runs one width throughout
// (GatedDeltaRule's dispatch), so its rows' bits never depend on the split either way.
TEST(GatedDeltaRuleTest, Avx512BlocksGiveTheBuildVectorsBits) {
  if (!cpu::CpuFeaturesInUse().Avx512()) {
    GTEST_SKIP() << "this CPU under DSCALE_CPU_ISA="
                 << cpu::CpuIsaCapName(cpu::CpuIsaCapFromEnvironment())
                 << " cannot run the AVX-512 column blocks";
  }
  const DeltaCase c;
  const DeltaResult build = RunInPieces(c, {c.rows}, 2, cpu::DeltaRuleVectors::kBuild);
  for (const DeltaResult& avx512 : {RunInPieces(c, {c.rows}, 2, cpu::DeltaRuleVectors::kAvx512),
                                    RunInPieces(c, {3, 1}, 1, cpu::DeltaRuleVectors::kAvx512)}) {
#if defined(__FMA__)
    EXPECT_TRUE(avx512 == build);
#else
    for (size_t i = 0; i < build.out.size(); ++i) {
      ASSERT_NEAR(avx512.out[i], build.out[i], 1e-4 * std::fabs(build.out[i]) + 1e-5) << i;
    }
    for (size_t i = 0; i < build.state.size(); ++i) {
      ASSERT_NEAR(avx512.state[i], build.state[i], 1e-4 * std::fabs(build.state[i]) + 1e-5) << i;
    }
#endif
  }
}

// The conv over 37 channels (whole vectors of either width and a tail), kernel 4, 23 rows in
// pieces of fewer rows than the window holds and of more.
TEST(CausalConv1dTest, ASpanSplitAnywhereGivesTheBitsOfOneCall) {
  const int64_t rows = 23, channels = 37, kernel = 4, stride = 41;
  std::mt19937 rng(3);
  const std::vector<float> in = RandomNormal(rng, rows * stride, 0.0f, 1.0f);
  const std::vector<float> taps = RandomNormal(rng, kernel * channels, 0.0f, 0.5f);
  const std::vector<float> window0 = RandomNormal(rng, (kernel - 1) * channels, 0.0f, 1.0f);
  const auto run = [&](const std::vector<int64_t>& pieces, int threads) {
    std::vector<float> window = window0, out(static_cast<size_t>(rows * channels));
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    int64_t first = 0;
    for (size_t i = 0; first < rows; ++i) {
      const int64_t count = i < pieces.size() ? std::min(pieces[i], rows - first) : rows - first;
      cpu::CausalConv1d(in.data() + first * stride, stride, count, channels, kernel, taps.data(),
                        window.data(), out.data() + first * channels, channels);
      first += count;
    }
    omp_set_num_threads(before);
    out.insert(out.end(), window.begin(), window.end());
    return out;
  };
  const std::vector<float> whole = run({rows}, 2);
  EXPECT_EQ(whole, run({rows}, 1));
  EXPECT_EQ(whole, run({1, 2, 1, 5}, 2));
  EXPECT_EQ(whole, run(std::vector<int64_t>(rows, 1), 1));
}

}  // namespace
}  // namespace dscale
