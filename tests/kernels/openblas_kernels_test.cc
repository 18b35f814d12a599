#include "kernels/cpu/openblas_kernels.h"

#include <gtest/gtest.h>

namespace dscale {
namespace {

TEST(OpenBlasKernelsTest, AvxTwoFamiliesMoveToSkylakeXOnlyWithAvx512) {
  EXPECT_EQ(cpu::BetterOpenBlasCoreType("Haswell", true), "SkylakeX");
  EXPECT_EQ(cpu::BetterOpenBlasCoreType("zen", true), "SkylakeX");
  EXPECT_EQ(cpu::BetterOpenBlasCoreType("Haswell", false), "");
  EXPECT_EQ(cpu::BetterOpenBlasCoreType("Zen", false), "");
}

TEST(OpenBlasKernelsTest, OtherChoicesStand) {
  for (const char* chosen : {"SkylakeX", "Cooperlake", "SapphireRapids", "Sandybridge", ""}) {
    EXPECT_EQ(cpu::BetterOpenBlasCoreType(chosen, true), "") << chosen;
  }
}

TEST(OpenBlasKernelsTest, TheLoadedLibraryNamesItsChoice) {
  EXPECT_FALSE(cpu::OpenBlasCoreName().empty());
}

}  // namespace
}  // namespace dscale
