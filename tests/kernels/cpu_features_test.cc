// The one description of the CPU (cpu_features.h): what a cap leaves of it, and every kernel
// family's variants read from it. Besides this machine's description, the tests run on described
// CPUs of each class the kernels target (an AVX2-only EPYC, a Zen 4 EPYC, an AMX Xeon), so they
// check the same rules on every machine.

#include "kernels/cpu/cpu_features.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include "kernels/cpu/bf16_isa.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/gemm_bf16_amx.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/gemm_int8_amx.h"
#include "kernels/cpu/openblas_kernels.h"

namespace dscale {
namespace {

using cpu::CpuFeatures;
using cpu::CpuIsaCap;

constexpr CpuIsaCap kEveryCap[] = {CpuIsaCap::kPortable, CpuIsaCap::kAvx2, CpuIsaCap::kAvx512,
                                   CpuIsaCap::kAmx};

// A Zen 3 EPYC: AVX2 and FMA, no AVX-512.
constexpr CpuFeatures kAvx2Epyc = {.avx = true, .avx2 = true, .fma = true, .amd = true};
// A Zen 4 EPYC: AVX-512 with AVX512-BF16 and AVX512-VNNI, no AMX.
constexpr CpuFeatures kZen4Epyc = {.avx = true,
                                   .avx2 = true,
                                   .fma = true,
                                   .avx512f = true,
                                   .avx512bw = true,
                                   .avx512cd = true,
                                   .avx512dq = true,
                                   .avx512vl = true,
                                   .avx512_bf16 = true,
                                   .avx512_vnni = true,
                                   .amd = true};
// A Sapphire Rapids Xeon: everything but the vendor.
constexpr CpuFeatures kAmxXeon = {.avx = true,
                                  .avx2 = true,
                                  .fma = true,
                                  .avx512f = true,
                                  .avx512bw = true,
                                  .avx512cd = true,
                                  .avx512dq = true,
                                  .avx512vl = true,
                                  .avx512_bf16 = true,
                                  .avx512_vnni = true,
                                  .avx_vnni = true,
                                  .amx_bf16 = true,
                                  .amx_int8 = true};

CpuFeatures EveryFeature() {
  CpuFeatures all;
  for (const cpu::CpuFeature& feature : cpu::kCpuFeatureTable) all.*feature.has = true;
  return all;
}

// Whether every feature of `a` is one of `b`'s.
bool IsSubset(const CpuFeatures& a, const CpuFeatures& b) {
  return std::all_of(
      std::begin(cpu::kCpuFeatureTable), std::end(cpu::kCpuFeatureTable),
      [&](const cpu::CpuFeature& feature) { return !(a.*feature.has) || b.*feature.has; });
}

std::vector<CpuFeatures> DescribedCpus() {
  return {CpuFeatures{}, kAvx2Epyc,      kZen4Epyc,
          kAmxXeon,      EveryFeature(), cpu::DetectedCpuFeatures()};
}

template <typename Isa>
bool Lists(const std::vector<Isa>& isas, Isa isa) {
  return std::find(isas.begin(), isas.end(), isa) != isas.end();
}

TEST(CpuFeaturesTest, EveryFieldHasATableRow) {
  for (const cpu::CpuFeature& feature : cpu::kCpuFeatureTable) {
    CpuFeatures one;
    one.*feature.has = true;
    EXPECT_NE(one, CpuFeatures{}) << feature.name;
    EXPECT_EQ(cpu::CpuFeaturesString(one), feature.name);
  }
  EXPECT_EQ(cpu::CpuFeaturesString(CpuFeatures{}), "none");
  EXPECT_EQ(cpu::CpuFeaturesString(kAvx2Epyc), "avx avx2 fma amd");
}

TEST(CpuFeaturesTest, ACapOnlyRemovesAndLowerCapsLeaveSubsets) {
  for (const CpuFeatures& described : DescribedCpus()) {
    SCOPED_TRACE(cpu::CpuFeaturesString(described));
    EXPECT_EQ(cpu::CappedCpuFeatures(described, CpuIsaCap::kAmx), described);
    for (const CpuIsaCap cap : kEveryCap) {
      const CpuFeatures capped = cpu::CappedCpuFeatures(described, cap);
      EXPECT_TRUE(IsSubset(capped, described)) << cpu::CpuIsaCapName(cap);
      for (const CpuIsaCap higher : kEveryCap) {
        if (higher < cap) continue;
        EXPECT_TRUE(IsSubset(capped, cpu::CappedCpuFeatures(described, higher)))
            << cpu::CpuIsaCapName(cap) << " within " << cpu::CpuIsaCapName(higher);
      }
    }
  }
}

TEST(CpuFeaturesTest, ACapKeepsExactlyTheFeaturesOfItsLevelAndBelow) {
  for (const CpuIsaCap cap : kEveryCap) {
    const CpuFeatures capped = cpu::CappedCpuFeatures(EveryFeature(), cap);
    for (const cpu::CpuFeature& feature : cpu::kCpuFeatureTable) {
      EXPECT_EQ(capped.*feature.has, feature.level <= cap)
          << feature.name << " under " << cpu::CpuIsaCapName(cap);
    }
  }
}

// What the kernels may use is the detected description capped, less AMX only where Linux refuses
// the tiles.
TEST(CpuFeaturesTest, TheKernelsFeaturesAreTheDetectedOnesCapped) {
  for (const CpuIsaCap cap : kEveryCap) {
    SCOPED_TRACE(cpu::CpuIsaCapName(cap));
    const CpuFeatures capped = cpu::CappedCpuFeatures(cpu::DetectedCpuFeatures(), cap);
    CpuFeatures usable = cpu::CpuFeaturesFor(cap);
    EXPECT_TRUE(IsSubset(usable, capped));
    usable.amx_bf16 = capped.amx_bf16;
    usable.amx_int8 = capped.amx_int8;
    EXPECT_EQ(usable, capped);
  }
  EXPECT_EQ(cpu::CpuFeaturesInUse(), cpu::CpuFeaturesFor(cpu::CpuIsaCapFromEnvironment()));
}

// Each family lists a variant exactly where the description has what the variant runs on.
void ExpectFamiliesReadTheDescription(const CpuFeatures& f) {
  const std::vector<cpu::Bf16Isa> bf16 = cpu::SupportedBf16Isas(f);
  EXPECT_EQ(bf16.front(), cpu::Bf16Isa::kPortable);
  EXPECT_EQ(Lists(bf16, cpu::Bf16Isa::kAvx2), f.avx2 && f.fma);
  EXPECT_EQ(Lists(bf16, cpu::Bf16Isa::kAvx512), f.avx512f && f.avx512bw);

  const bool avx512_bf16 = f.avx512f && f.avx512bw && f.avx512_bf16;
  EXPECT_EQ(cpu::HasAvx512Bf16(f), avx512_bf16);
  EXPECT_EQ(cpu::HasFullRateAvx512Bf16(f), avx512_bf16 && f.amd);
  EXPECT_EQ(cpu::HasAmxBf16(f), f.amx_bf16);
  const std::vector<cpu::Bf16DotIsa> dot = cpu::SupportedBf16DotIsas(f);
  EXPECT_EQ(Lists(dot, cpu::Bf16DotIsa::kAvx2), f.avx2 && f.fma);
  EXPECT_EQ(Lists(dot, cpu::Bf16DotIsa::kAvx512), f.avx512f && f.avx512bw);
  EXPECT_EQ(Lists(dot, cpu::Bf16DotIsa::kAvx512Bf16), avx512_bf16);
  EXPECT_EQ(Lists(dot, cpu::Bf16DotIsa::kAmx), avx512_bf16 && f.amx_bf16);

  const bool avx2 = f.avx2 && f.fma;
  EXPECT_EQ(cpu::HasAmxInt8(f), f.amx_int8 && f.avx512f);
  const std::vector<cpu::Int8DotIsa> int8 = cpu::SupportedInt8DotIsas(f);
  EXPECT_EQ(int8.front(), cpu::Int8DotIsa::kPortable);
  EXPECT_EQ(Lists(int8, cpu::Int8DotIsa::kAvx2), avx2);
  EXPECT_EQ(Lists(int8, cpu::Int8DotIsa::kAvxVnni), avx2 && f.avx_vnni);
  EXPECT_EQ(Lists(int8, cpu::Int8DotIsa::kAvx512Vnni),
            avx2 && f.avx512f && f.avx512bw && f.avx512_vnni);
  EXPECT_EQ(Lists(int8, cpu::Int8DotIsa::kAmx), avx2 && f.amx_int8 && f.avx512f);

  const cpu::OpenBlasSimd simd = cpu::CpuSimdForOpenBlas(f);
  EXPECT_EQ(simd == cpu::OpenBlasSimd::kAvx512,
            f.avx512f && f.avx512bw && f.avx512cd && f.avx512dq && f.avx512vl);
  EXPECT_EQ(simd >= cpu::OpenBlasSimd::kAvx2, simd == cpu::OpenBlasSimd::kAvx512 || avx2);
}

TEST(CpuFeaturesTest, EveryFamilyListsWhatTheCappedDescriptionHas) {
  for (const CpuFeatures& described : DescribedCpus()) {
    for (const CpuIsaCap cap : kEveryCap) {
      const CpuFeatures capped = cpu::CappedCpuFeatures(described, cap);
      SCOPED_TRACE(cpu::CpuFeaturesString(described) + " under " +
                   std::string(cpu::CpuIsaCapName(cap)));
      ExpectFamiliesReadTheDescription(capped);
      EXPECT_LE(cpu::CpuSimdForOpenBlas(capped), cpu::OpenBlasSimdCap(cap));
    }
  }
}

// This machine's families, under every cap, are those of its capped description.
TEST(CpuFeaturesTest, EachCapsVariantsAreThoseOfItsDescription) {
  for (const CpuIsaCap cap : kEveryCap) {
    SCOPED_TRACE(cpu::CpuIsaCapName(cap));
    const CpuFeatures f = cpu::CpuFeaturesFor(cap);
    ExpectFamiliesReadTheDescription(f);
    EXPECT_EQ(cpu::SupportedBf16Isas(cap), cpu::SupportedBf16Isas(f));
    EXPECT_EQ(cpu::SupportedBf16DotIsas(cap), cpu::SupportedBf16DotIsas(f));
    EXPECT_EQ(cpu::SupportedInt8DotIsas(cap), cpu::SupportedInt8DotIsas(f));
    EXPECT_EQ(cpu::HasAvx512Bf16(cap), cpu::HasAvx512Bf16(f));
    EXPECT_EQ(cpu::HasFullRateAvx512Bf16(cap), cpu::HasFullRateAvx512Bf16(f));
    EXPECT_EQ(cpu::HasAmxBf16(cap), cpu::HasAmxBf16(f));
    EXPECT_EQ(cpu::HasAmxInt8(cap), cpu::HasAmxInt8(f));
    EXPECT_EQ(cpu::CpuSimdForOpenBlas(cap), cpu::CpuSimdForOpenBlas(f));
  }
  const CpuFeatures& in_use = cpu::CpuFeaturesInUse();
  EXPECT_EQ(cpu::HasAvx2Fma(), in_use.Avx2Fma());
  EXPECT_EQ(cpu::SupportedBf16Isas(), cpu::SupportedBf16Isas(in_use));
  EXPECT_EQ(cpu::SupportedBf16DotIsas(), cpu::SupportedBf16DotIsas(in_use));
  EXPECT_EQ(cpu::SupportedInt8DotIsas(), cpu::SupportedInt8DotIsas(in_use));
  EXPECT_EQ(cpu::HasFullRateAvx512Bf16(), cpu::HasFullRateAvx512Bf16(in_use));
  EXPECT_EQ(cpu::CpuSimdForOpenBlas(), cpu::CpuSimdForOpenBlas(in_use));
}

// The variant each family picks on each class of CPU under each cap.
struct Picks {
  CpuFeatures cpu;
  CpuIsaCap cap;
  cpu::Bf16Isa bf16;
  cpu::Bf16DotIsa bf16_dot;
  cpu::Int8DotIsa int8_dot;
  cpu::OpenBlasSimd openblas;
  bool full_rate_bf16;
};

TEST(CpuFeaturesTest, EachClassOfCpuPicksItsVariants) {
  using B = cpu::Bf16Isa;
  using D = cpu::Bf16DotIsa;
  using I = cpu::Int8DotIsa;
  using O = cpu::OpenBlasSimd;
  const Picks table[] = {
      {kAvx2Epyc, CpuIsaCap::kAmx, B::kAvx2, D::kAvx2, I::kAvx2, O::kAvx2, false},
      {kAvx2Epyc, CpuIsaCap::kAvx2, B::kAvx2, D::kAvx2, I::kAvx2, O::kAvx2, false},
      {kAvx2Epyc, CpuIsaCap::kPortable, B::kPortable, D::kPortable, I::kPortable, O::kSse, false},
      {kZen4Epyc, CpuIsaCap::kAmx, B::kAvx512, D::kAvx512Bf16, I::kAvx512Vnni, O::kAvx512, true},
      {kZen4Epyc, CpuIsaCap::kAvx512, B::kAvx512, D::kAvx512Bf16, I::kAvx512Vnni, O::kAvx512, true},
      {kZen4Epyc, CpuIsaCap::kAvx2, B::kAvx2, D::kAvx2, I::kAvx2, O::kAvx2, false},
      {kZen4Epyc, CpuIsaCap::kPortable, B::kPortable, D::kPortable, I::kPortable, O::kSse, false},
      {kAmxXeon, CpuIsaCap::kAmx, B::kAvx512, D::kAmx, I::kAmx, O::kAvx512, false},
      {kAmxXeon, CpuIsaCap::kAvx512, B::kAvx512, D::kAvx512Bf16, I::kAvx512Vnni, O::kAvx512, false},
      {kAmxXeon, CpuIsaCap::kAvx2, B::kAvx2, D::kAvx2, I::kAvx2, O::kAvx2, false},
      {kAmxXeon, CpuIsaCap::kPortable, B::kPortable, D::kPortable, I::kPortable, O::kSse, false},
  };
  for (const Picks& want : table) {
    const CpuFeatures f = cpu::CappedCpuFeatures(want.cpu, want.cap);
    SCOPED_TRACE(cpu::CpuFeaturesString(want.cpu) + " under " +
                 std::string(cpu::CpuIsaCapName(want.cap)));
    EXPECT_EQ(cpu::SupportedBf16Isas(f).back(), want.bf16);
    EXPECT_EQ(cpu::SupportedBf16DotIsas(f).back(), want.bf16_dot);
    EXPECT_EQ(cpu::SupportedInt8DotIsas(f).back(), want.int8_dot);
    EXPECT_EQ(cpu::CpuSimdForOpenBlas(f), want.openblas);
    EXPECT_EQ(cpu::HasFullRateAvx512Bf16(f), want.full_rate_bf16);
  }
}

}  // namespace
}  // namespace dscale
