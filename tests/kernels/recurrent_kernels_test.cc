// Parity of the Domino head's elementwise kernels (the GRU update, in-place SiLU) against the
// double-precision references, at odd sizes.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/recurrent.h"
#include "kernels/reference/reference_kernels.h"

namespace dscale {
namespace {

using testing::kElementwiseAbsTol;
using testing::kElementwiseRelTol;
using testing::kTestRows;
using testing::MaxExcessOverRelative;
using testing::RandomNormal;

constexpr int64_t kWidths[] = {1, 17, 67, 255};

TEST(GruUpdateTest, MatchesReferenceAtOddSizes) {
  std::mt19937 rng(211);
  for (const int64_t rows : kTestRows) {
    for (const int64_t hidden : kWidths) {
      SCOPED_TRACE(::testing::Message() << "rows=" << rows << " hidden=" << hidden);
      // Gates spread over [-9, 9] so both saturated and linear regions of σ and tanh occur.
      const auto gates_x = RandomNormal(rng, rows * 3 * hidden, 0.0f, 3.0f);
      const auto gates_h = RandomNormal(rng, rows * 3 * hidden, 0.0f, 3.0f);
      const auto h0 = RandomNormal(rng, rows * hidden);
      std::vector<float> got = h0, want = h0;
      cpu::GruUpdate(gates_x.data(), gates_h.data(), got.data(), rows, hidden);
      ref::GruUpdate(gates_x.data(), gates_h.data(), want.data(), rows, hidden);
      EXPECT_LE(MaxExcessOverRelative(got, want, kElementwiseRelTol), kElementwiseAbsTol);
    }
  }
}

// A state with saturated gates: z = 1 keeps the state, z = 0 replaces it by n.
TEST(GruUpdateTest, SaturatedUpdateGateKeepsOrReplacesTheState) {
  const int64_t hidden = 2;
  // Row layout [r r | z z | n n]: unit 0 with z → 1, unit 1 with z → 0; r = 0.5, n = tanh(0.5).
  const std::vector<float> gates_x = {0, 0, 100, -100, 0.5f, 0.5f};
  const std::vector<float> gates_h = {0, 0, 0, 0, 0, 0};
  std::vector<float> h = {0.25f, 0.75f};
  cpu::GruUpdate(gates_x.data(), gates_h.data(), h.data(), 1, hidden);
  EXPECT_FLOAT_EQ(h[0], 0.25f);
  EXPECT_FLOAT_EQ(h[1], std::tanh(0.5f));
}

TEST(SiluInPlaceTest, MatchesReferenceAtOddSizes) {
  std::mt19937 rng(223);
  for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{17}, int64_t{67}, int64_t{4161}}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    const auto x = RandomNormal(rng, n, 0.0f, 6.0f);
    std::vector<float> got = x, want = x;
    cpu::SiluInPlace(got.data(), n);
    ref::SiluInPlace(want.data(), n);
    EXPECT_LE(MaxExcessOverRelative(got, want, kElementwiseRelTol), kElementwiseAbsTol);
  }
}

}  // namespace
}  // namespace dscale
