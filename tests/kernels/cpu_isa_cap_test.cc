// DSCALE_CPU_ISA: its values, and the cap every detection applies. The detections are compared
// under each cap with the uncapped one (amx), so the tests hold whatever this CPU has.

#include "kernels/cpu/cpu_isa_cap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "kernels/cpu/bf16_isa.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/gemm_bf16_amx.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/gemm_int8_amx.h"
#include "kernels/cpu/openblas_kernels.h"

namespace dscale {
namespace {

using cpu::CpuIsaCap;

constexpr CpuIsaCap kCaps[] = {CpuIsaCap::kPortable, CpuIsaCap::kAvx2, CpuIsaCap::kAvx512,
                               CpuIsaCap::kAmx};

TEST(CpuIsaCapTest, EachValueSelectsItsCap) {
  EXPECT_EQ(*cpu::ParseCpuIsaCap("portable"), CpuIsaCap::kPortable);
  EXPECT_EQ(*cpu::ParseCpuIsaCap("avx2"), CpuIsaCap::kAvx2);
  EXPECT_EQ(*cpu::ParseCpuIsaCap("avx512"), CpuIsaCap::kAvx512);
  EXPECT_EQ(*cpu::ParseCpuIsaCap("amx"), CpuIsaCap::kAmx);
  // Set empty, as unset: no cap.
  EXPECT_EQ(*cpu::ParseCpuIsaCap(""), CpuIsaCap::kAmx);
  for (const CpuIsaCap cap : kCaps) {
    EXPECT_EQ(*cpu::ParseCpuIsaCap(cpu::CpuIsaCapName(cap)), cap) << cpu::CpuIsaCapName(cap);
  }
}

TEST(CpuIsaCapTest, AnUnknownValueIsAnErrorNamingTheVariableAndTheValues) {
  for (const char* value : {"avx3", "AVX2", "sse", "avx512vnni", " avx2", "amx "}) {
    const Result<CpuIsaCap> cap = cpu::ParseCpuIsaCap(value);
    ASSERT_FALSE(cap.ok()) << value;
    EXPECT_EQ(cap.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(cap.status().message(),
              std::string("DSCALE_CPU_ISA: expected portable, avx2, avx512 or amx, got \"") +
                  value + "\"");
  }
}

TEST(CpuIsaCapTest, EachCapAllowsItsLevelAndTheOnesBelow) {
  for (const CpuIsaCap cap : kCaps) {
    for (const CpuIsaCap level : kCaps) {
      EXPECT_EQ(cpu::CpuIsaCapAllows(cap, level), level <= cap)
          << cpu::CpuIsaCapName(cap) << " " << cpu::CpuIsaCapName(level);
    }
  }
}

// The level each variant needs (cpu_isa_cap.h lists what each level holds).
CpuIsaCap LevelOf(cpu::Bf16Isa isa) {
  switch (isa) {
    case cpu::Bf16Isa::kAvx512:
      return CpuIsaCap::kAvx512;
    case cpu::Bf16Isa::kAvx2:
      return CpuIsaCap::kAvx2;
    case cpu::Bf16Isa::kPortable:
      break;
  }
  return CpuIsaCap::kPortable;
}

CpuIsaCap LevelOf(cpu::Bf16DotIsa isa) {
  switch (isa) {
    case cpu::Bf16DotIsa::kAmx:
      return CpuIsaCap::kAmx;
    case cpu::Bf16DotIsa::kAvx512Bf16:
    case cpu::Bf16DotIsa::kAvx512:
      return CpuIsaCap::kAvx512;
    case cpu::Bf16DotIsa::kAvx2:
      return CpuIsaCap::kAvx2;
    case cpu::Bf16DotIsa::kPortable:
      break;
  }
  return CpuIsaCap::kPortable;
}

CpuIsaCap LevelOf(cpu::Int8DotIsa isa) {
  switch (isa) {
    case cpu::Int8DotIsa::kAmx:
      return CpuIsaCap::kAmx;
    case cpu::Int8DotIsa::kAvx512Vnni:
    case cpu::Int8DotIsa::kAvxVnni:
      return CpuIsaCap::kAvx512;
    case cpu::Int8DotIsa::kAvx2:
      return CpuIsaCap::kAvx2;
    case cpu::Int8DotIsa::kPortable:
      break;
  }
  return CpuIsaCap::kPortable;
}

// Under every cap a detection lists exactly the uncapped detection's variants at or below the
// cap, in the same order: a subset of what the CPU has, nothing above the cap, nothing the cap
// allows left out.
template <typename Isa>
void ExpectUncappedWithinCap(const std::function<std::vector<Isa>(CpuIsaCap)>& detect) {
  const std::vector<Isa> uncapped = detect(CpuIsaCap::kAmx);
  ASSERT_FALSE(uncapped.empty());
  for (const CpuIsaCap cap : kCaps) {
    SCOPED_TRACE(cpu::CpuIsaCapName(cap));
    std::vector<Isa> want;
    for (const Isa isa : uncapped) {
      if (cpu::CpuIsaCapAllows(cap, LevelOf(isa))) want.push_back(isa);
    }
    const std::vector<Isa> got = detect(cap);
    EXPECT_EQ(got, want);
    for (const Isa isa : got) EXPECT_LE(LevelOf(isa), cap);
  }
}

TEST(CpuIsaCapTest, EveryVariantListHoldsTheUncappedOnesWithinTheCap) {
  ExpectUncappedWithinCap<cpu::Bf16Isa>([](CpuIsaCap cap) { return cpu::SupportedBf16Isas(cap); });
  ExpectUncappedWithinCap<cpu::Bf16DotIsa>(
      [](CpuIsaCap cap) { return cpu::SupportedBf16DotIsas(cap); });
  ExpectUncappedWithinCap<cpu::Int8DotIsa>(
      [](CpuIsaCap cap) { return cpu::SupportedInt8DotIsas(cap); });
}

TEST(CpuIsaCapTest, AtAvx2NothingAboveAvx2IsDetected) {
  const std::vector<cpu::Bf16Isa> bf16 = cpu::SupportedBf16Isas(CpuIsaCap::kAvx2);
  EXPECT_LE(bf16.size(), 2u);
  EXPECT_EQ(bf16.front(), cpu::Bf16Isa::kPortable);
  for (const cpu::Bf16DotIsa isa : cpu::SupportedBf16DotIsas(CpuIsaCap::kAvx2)) {
    EXPECT_TRUE(isa == cpu::Bf16DotIsa::kPortable || isa == cpu::Bf16DotIsa::kAvx2)
        << cpu::Bf16DotIsaName(isa);
  }
  for (const cpu::Int8DotIsa isa : cpu::SupportedInt8DotIsas(CpuIsaCap::kAvx2)) {
    EXPECT_TRUE(isa == cpu::Int8DotIsa::kPortable || isa == cpu::Int8DotIsa::kAvx2)
        << cpu::Int8DotIsaName(isa);
  }
  EXPECT_FALSE(cpu::HasAvx512Bf16(CpuIsaCap::kAvx2));
  EXPECT_FALSE(cpu::HasAmxBf16(CpuIsaCap::kAvx2));
  EXPECT_FALSE(cpu::HasAmxInt8(CpuIsaCap::kAvx2));
}

TEST(CpuIsaCapTest, TheSingleFeaturesAreTheUncappedOnesWithinTheCap) {
  for (const CpuIsaCap cap : kCaps) {
    SCOPED_TRACE(cpu::CpuIsaCapName(cap));
    const bool avx512 = cpu::CpuIsaCapAllows(cap, CpuIsaCap::kAvx512);
    const bool amx = cpu::CpuIsaCapAllows(cap, CpuIsaCap::kAmx);
    EXPECT_EQ(cpu::HasAvx512Bf16(cap), avx512 && cpu::HasAvx512Bf16(CpuIsaCap::kAmx));
    EXPECT_EQ(cpu::HasAmxBf16(cap), amx && cpu::HasAmxBf16(CpuIsaCap::kAmx));
    EXPECT_EQ(cpu::HasAmxInt8(cap), amx && cpu::HasAmxInt8(CpuIsaCap::kAmx));
  }
}

TEST(CpuIsaCapTest, OpenBlasLevelIsTheUncappedOneWithinTheCap) {
  const cpu::OpenBlasSimd uncapped = cpu::CpuSimdForOpenBlas(CpuIsaCap::kAmx);
  EXPECT_EQ(cpu::CpuSimdForOpenBlas(CpuIsaCap::kAvx512), uncapped);
  EXPECT_EQ(cpu::CpuSimdForOpenBlas(CpuIsaCap::kAvx2),
            std::min(uncapped, cpu::OpenBlasSimd::kAvx2));
  EXPECT_EQ(cpu::CpuSimdForOpenBlas(CpuIsaCap::kPortable), cpu::OpenBlasSimd::kSse);
}

// The detections the kernels use apply the environment's cap (whatever DSCALE_CPU_ISA this test
// runs under: the suite runs once without it and may run again under a cap).
TEST(CpuIsaCapTest, TheKernelsDetectUnderTheEnvironmentsCap) {
  const CpuIsaCap cap = cpu::CpuIsaCapFromEnvironment();
  EXPECT_EQ(cpu::SupportedBf16Isas(), cpu::SupportedBf16Isas(cap));
  EXPECT_EQ(cpu::BestBf16Isa(), cpu::SupportedBf16Isas(cap).back());
  EXPECT_EQ(cpu::SupportedBf16DotIsas(), cpu::SupportedBf16DotIsas(cap));
  EXPECT_EQ(cpu::SupportedInt8DotIsas(), cpu::SupportedInt8DotIsas(cap));
  EXPECT_EQ(cpu::BestInt8DotIsa(), cpu::SupportedInt8DotIsas(cap).back());
  EXPECT_EQ(cpu::HasAvx512Bf16(), cpu::HasAvx512Bf16(cap));
  EXPECT_EQ(cpu::HasAmxBf16(), cpu::HasAmxBf16(cap));
  EXPECT_EQ(cpu::HasAmxInt8(), cpu::HasAmxInt8(cap));
  EXPECT_EQ(cpu::CpuSimdForOpenBlas(), cpu::CpuSimdForOpenBlas(cap));
}

}  // namespace
}  // namespace dscale
