#include "core/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>

namespace dscale {
namespace {

// Small vectors come from the heap; from 2 MB on the storage starts on a 2 MB boundary. Either
// holds what is written, through growth and copies.
TEST(HugePageVectorTest, HoldsItsValuesAndMapsLargeOnesOnAHugePageBoundary) {
  HugePageVector<float> small(1000);
  std::iota(small.begin(), small.end(), 0.0f);
  EXPECT_EQ(small[999], 999.0f);

  const size_t n = kHugePageBytes / sizeof(float) * 3 + 17;  // past 6 MB, not a whole page
  HugePageVector<float> large(n, 0.0f);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(large.data()) % kHugePageBytes, 0u);
  std::iota(large.begin(), large.end(), 1.0f);
  large.resize(2 * n);  // moves into a new mapping; the old one is returned
  EXPECT_EQ(large[n - 1], static_cast<float>(n));
  EXPECT_EQ(large[2 * n - 1], 0.0f);
  const HugePageVector<float> copy = large;
  EXPECT_EQ(copy, large);
  small = HugePageVector<float>(large.begin(), large.begin() + 4);
  EXPECT_EQ(small[3], 4.0f);
}

}  // namespace
}  // namespace dscale
