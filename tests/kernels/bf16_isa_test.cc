// The BF16 variants the CPU kernels share: detection, and the row widening of every variant
// against the exact scalar conversion at odd lengths.

#include "kernels/cpu/bf16_isa.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace dscale {
namespace {

TEST(Bf16IsaTest, PortableFirstAndTheBestLast) {
  const std::vector<cpu::Bf16Isa> isas = cpu::SupportedBf16Isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), cpu::Bf16Isa::kPortable);
  EXPECT_EQ(isas.back(), cpu::BestBf16Isa());
}

// Widening is exact, so every variant gives Bf16ToF32's bits, vector body and scalar tail alike
// (lengths around the 8- and 16-lane widths, at an unaligned start).
TEST(Bf16IsaTest, EveryVariantWidensExactly) {
  std::mt19937 rng(9);
  std::vector<uint16_t> bits(1 + 300);
  for (uint16_t& b : bits) b = static_cast<uint16_t>(rng());
  for (const cpu::Bf16Isa isa : cpu::SupportedBf16Isas()) {
    for (const int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 33, 128, 300}) {
      SCOPED_TRACE(::testing::Message() << cpu::Bf16IsaName(isa) << " n=" << n);
      std::vector<float> got(static_cast<size_t>(n) + 1, -1.0f);
      cpu::WidenBf16For(isa)(bits.data() + 1, n, got.data());
      for (int64_t i = 0; i < n; ++i) {
        const float want = Bf16ToF32(bits[static_cast<size_t>(i) + 1]);
        // NaN payloads survive widening; compare bits.
        EXPECT_EQ(std::memcmp(&got[i], &want, sizeof(float)), 0) << "element " << i;
      }
      EXPECT_EQ(got[static_cast<size_t>(n)], -1.0f) << "wrote past the end";
    }
  }
}

// The vendor as /proc/cpuinfo names it ("AuthenticAMD", "GenuineIntel"), "" where unreadable.
std::string CpuVendor() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("vendor_id", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "";
}

// AVX512-BF16 at the FMA's rate (what makes --activations bf16 the default without AMX): exactly
// the CPUs with AVX512-BF16 whose vendor is AMD, and none under a cap below AVX-512.
TEST(Bf16IsaTest, FullRateBf16DotProductsAreAmdsAvx512Bf16) {
  const std::string vendor = CpuVendor();
  ASSERT_FALSE(vendor.empty()) << "no vendor_id in /proc/cpuinfo";
  for (const cpu::CpuIsaCap cap : {cpu::CpuIsaCap::kAvx512, cpu::CpuIsaCap::kAmx}) {
    EXPECT_EQ(cpu::HasFullRateAvx512Bf16(cap), cpu::HasAvx512Bf16(cap) && vendor == "AuthenticAMD")
        << vendor << " cap " << cpu::CpuIsaCapName(cap);
  }
  EXPECT_FALSE(cpu::HasFullRateAvx512Bf16(cpu::CpuIsaCap::kAvx2));
  EXPECT_FALSE(cpu::HasFullRateAvx512Bf16(cpu::CpuIsaCap::kPortable));
}

}  // namespace
}  // namespace dscale
