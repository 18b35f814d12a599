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

// Under DSCALE_CPU_ISA's cap a family above it moves down to the cap's own (AVX2: Haswell; the
// portable cap: the SSE3 family, x86-64's floor); a family within the cap, or unknown, stands.
TEST(OpenBlasKernelsTest, FamiliesAboveTheCpuIsaCapMoveDownToIt) {
  using cpu::CpuIsaCap;
  EXPECT_EQ(cpu::CappedOpenBlasCoreType("SkylakeX", CpuIsaCap::kAvx2), "Haswell");
  EXPECT_EQ(cpu::CappedOpenBlasCoreType("SapphireRapids", CpuIsaCap::kAvx2), "Haswell");
  EXPECT_EQ(cpu::CappedOpenBlasCoreType("SkylakeX", CpuIsaCap::kPortable), "Prescott");
  EXPECT_EQ(cpu::CappedOpenBlasCoreType("Zen", CpuIsaCap::kPortable), "Prescott");
  EXPECT_EQ(cpu::CappedOpenBlasCoreType("Sandybridge", CpuIsaCap::kPortable), "Prescott");
  for (const char* chosen : {"Haswell", "Zen", "Sandybridge", "Prescott", "", "SomeFutureCore"}) {
    EXPECT_EQ(cpu::CappedOpenBlasCoreType(chosen, CpuIsaCap::kAvx2), "") << chosen;
  }
  for (const CpuIsaCap cap : {CpuIsaCap::kAvx512, CpuIsaCap::kAmx}) {
    EXPECT_EQ(cpu::CappedOpenBlasCoreType("SkylakeX", cap), "");
    EXPECT_EQ(cpu::CappedOpenBlasCoreType("Cooperlake", cap), "");
  }
  EXPECT_EQ(cpu::CappedOpenBlasCoreType("Core2", CpuIsaCap::kPortable), "");
  EXPECT_EQ(cpu::OpenBlasSimdCap(CpuIsaCap::kPortable), OpenBlasSimd::kSse);
  EXPECT_EQ(cpu::OpenBlasSimdCap(CpuIsaCap::kAvx2), OpenBlasSimd::kAvx2);
  EXPECT_EQ(cpu::OpenBlasSimdCap(CpuIsaCap::kAvx512), OpenBlasSimd::kAvx512);
  EXPECT_EQ(cpu::OpenBlasSimdCap(CpuIsaCap::kAmx), OpenBlasSimd::kAvx512);
}

TEST(OpenBlasKernelsTest, TheLoadedLibraryNamesItsChoice) {
  EXPECT_FALSE(cpu::OpenBlasCoreName().empty());
}

}  // namespace
}  // namespace dscale
