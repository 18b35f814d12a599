#include "kernels/cpu/openblas_kernels.h"

#include <gtest/gtest.h>

namespace dscale {
namespace {

using cpu::OpenBlasSimd;

TEST(OpenBlasKernelsTest, AvxTwoFamiliesMoveToSkylakeXOnlyWithAvx512) {
  EXPECT_EQ(cpu::BetterOpenBlasCoreType("Haswell", OpenBlasSimd::kAvx512), "SkylakeX");
  EXPECT_EQ(cpu::BetterOpenBlasCoreType("zen", OpenBlasSimd::kAvx512), "SkylakeX");
  EXPECT_EQ(cpu::BetterOpenBlasCoreType("Haswell", OpenBlasSimd::kAvx2), "");
  EXPECT_EQ(cpu::BetterOpenBlasCoreType("Zen", OpenBlasSimd::kAvx2), "");
}

// A CPU model newer than the library (Emerald Rapids under OpenBLAS 0.3.21) gets the SSE3
// fallback: move to the widest family the CPU runs.
TEST(OpenBlasKernelsTest, FallbackFamiliesMoveToTheWidestTheCpuRuns) {
  EXPECT_EQ(cpu::BetterOpenBlasCoreType("Prescott", OpenBlasSimd::kAvx512), "SkylakeX");
  EXPECT_EQ(cpu::BetterOpenBlasCoreType("Prescott", OpenBlasSimd::kAvx2), "Haswell");
  EXPECT_EQ(cpu::BetterOpenBlasCoreType("Nehalem", OpenBlasSimd::kAvx), "Sandybridge");
  EXPECT_EQ(cpu::BetterOpenBlasCoreType("Sandybridge", OpenBlasSimd::kAvx512), "SkylakeX");
  EXPECT_EQ(cpu::BetterOpenBlasCoreType("Bulldozer", OpenBlasSimd::kAvx2), "Haswell");
  EXPECT_EQ(cpu::BetterOpenBlasCoreType("Prescott", OpenBlasSimd::kSse), "");
}

TEST(OpenBlasKernelsTest, OtherChoicesStand) {
  for (const char* chosen : {"SkylakeX", "Cooperlake", "SapphireRapids", "", "SomeFutureCore"}) {
    EXPECT_EQ(cpu::BetterOpenBlasCoreType(chosen, OpenBlasSimd::kAvx512), "") << chosen;
  }
  EXPECT_EQ(cpu::BetterOpenBlasCoreType("Sandybridge", OpenBlasSimd::kAvx), "");
}

TEST(OpenBlasKernelsTest, FamiliesHaveTheirLevels) {
  EXPECT_EQ(cpu::OpenBlasFamilySimd("SKYLAKEX"), OpenBlasSimd::kAvx512);
  EXPECT_EQ(cpu::OpenBlasFamilySimd("Zen"), OpenBlasSimd::kAvx2);
  EXPECT_EQ(cpu::OpenBlasFamilySimd("Piledriver"), OpenBlasSimd::kAvx);
  EXPECT_EQ(cpu::OpenBlasFamilySimd("Core2"), OpenBlasSimd::kSse);
  EXPECT_EQ(cpu::OpenBlasFamilySimd("Generic"), OpenBlasSimd::kUnknown);
}

TEST(OpenBlasKernelsTest, TheLoadedLibraryNamesItsChoice) {
  EXPECT_FALSE(cpu::OpenBlasCoreName().empty());
}

}  // namespace
}  // namespace dscale
