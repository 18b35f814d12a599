// The Domino head's GRU update at saturated gates. Its parity with the reference at odd sizes,
// and SiLU's, is the op table's (op_parity_test.cc).

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/recurrent.h"

namespace dscale {
namespace {

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

}  // namespace
}  // namespace dscale
