#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace dscale {
namespace {

TEST(DTypeTest, NamesRoundTrip) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16}) {
    EXPECT_EQ(DTypeFromName(DTypeName(d)), d);
  }
  EXPECT_FALSE(DTypeFromName("F64").has_value());
  EXPECT_FALSE(DTypeFromName("bf16").has_value());
}

TEST(DTypeTest, Bf16IsExactOnEveryBitPattern) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float f = Bf16ToF32(static_cast<uint16_t>(bits));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(f))));
    } else {
      EXPECT_EQ(F32ToBf16(f), bits);
    }
  }
}

TEST(DTypeTest, F16IsExactOnEveryBitPattern) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float f = F16ToF32(static_cast<uint16_t>(bits));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(f))));
    } else {
      EXPECT_EQ(F32ToF16(f), bits) << "bits " << bits;
    }
  }
}

TEST(DTypeTest, F16KnownValues) {
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0xc000), -2.0f);
  EXPECT_EQ(F16ToF32(0x7bff), 65504.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(F32ToF16(1e6f), 0x7c00);                   // overflow -> +inf
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -26)), 0x0000);  // below half the smallest subnormal
}

TEST(DTypeTest, RoundsToNearestEven) {
  // 1 + 2^-8 lies exactly between two bf16 values (1 and 1 + 2^-7): ties go to even (1).
  EXPECT_EQ(F32ToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3·2^-8 lies between 1 + 2^-7 (odd) and 1 + 2^-6 (even): goes up.
  EXPECT_EQ(F32ToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  // f16: 1 + 2^-11 is a tie between 1 and 1 + 2^-10 -> 1.
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
}

TEST(DTypeTest, ConvertBuffers) {
  const std::vector<float> values = {0.0f, -1.5f, 3.25f, 1e-3f, 7.0f};
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16}) {
    std::vector<unsigned char> bytes(values.size() * DTypeSize(d));
    ConvertFromF32(d, values.data(), values.size(), bytes.data());
    std::vector<float> back(values.size());
    ConvertToF32(d, bytes.data(), values.size(), back.data());
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_NEAR(back[i], values[i], std::abs(values[i]) * 4e-3f) << DTypeName(d);
    }
  }
}

TEST(DTypeTest, FirstNonFiniteFindsNanAndInfinityInEveryType) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(std::string(DTypeName(d)));
    std::vector<float> values(9000, 0.5f);
    values[17] = -65504.0f;  // the largest f16, finite in every type
    std::vector<unsigned char> bytes(values.size() * DTypeSize(d));
    ConvertFromF32(d, values.data(), values.size(), bytes.data());
    EXPECT_EQ(FirstNonFinite(d, bytes.data(), values.size()), -1);
    EXPECT_EQ(FirstNonFinite(d, bytes.data(), 0), -1);
    for (const float bad :
         {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
          -std::numeric_limits<float>::infinity()}) {
      values[5000] = bad;  // in the second block of the scan
      values[8999] = bad;
      ConvertFromF32(d, values.data(), values.size(), bytes.data());
      EXPECT_EQ(FirstNonFinite(d, bytes.data(), values.size()), 5000) << bad;
      EXPECT_EQ(FirstNonFinite(d, bytes.data(), 5000), -1) << bad;
    }
    values[5000] = values[8999] = 0.5f;
  }
}

// The scan compares several elements at once: every position within a word, every short tail,
// unaligned data, and neighbours that are as close to non-finite as a finite value gets (the
// largest finite values, and exponents one step below all ones, positive and negative).
TEST(DTypeTest, FirstNonFiniteFindsEveryPositionBesideTheLargestFiniteValues) {
  struct Bits {
    DType dtype;
    std::vector<uint32_t> finite, bad;
  };
  const Bits types[] = {
      {DType::kF32,
       {0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F000000u, 0x00800000u, 0x80000000u},
       {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u}},
      {DType::kBF16,
       {0x7F7Fu, 0xFF7Fu, 0x7F00u, 0x0080u, 0x8000u},
       {0x7F80u, 0xFF80u, 0x7FC0u, 0x7F81u}},
      {DType::kF16,
       {0x7BFFu, 0xFBFFu, 0x7800u, 0x0400u, 0x8000u},
       {0x7C00u, 0xFC00u, 0x7E00u, 0x7C01u}},
  };
  for (const Bits& t : types) {
    SCOPED_TRACE(std::string(DTypeName(t.dtype)));
    const size_t size = DTypeSize(t.dtype);
    for (size_t count = 1; count <= 13; ++count) {
      for (size_t offset = 0; offset < 4; ++offset) {
        std::vector<unsigned char> bytes(offset + count * size);
        const auto put = [&](size_t i, uint32_t bits) {
          std::memcpy(bytes.data() + offset + i * size, &bits, size);  // little-endian
        };
        for (size_t i = 0; i < count; ++i) put(i, t.finite[i % t.finite.size()]);
        const void* data = bytes.data() + offset;
        ASSERT_EQ(FirstNonFinite(t.dtype, data, count), -1) << count << " at +" << offset;
        for (size_t at = 0; at < count; ++at) {
          const uint32_t bad = t.bad[(at + count) % t.bad.size()];
          put(at, bad);
          ASSERT_EQ(FirstNonFinite(t.dtype, data, count), static_cast<int64_t>(at))
              << count << " at +" << offset << ": " << std::hex << bad;
          put(at, t.finite[at % t.finite.size()]);
        }
      }
    }
  }
}

}  // namespace
}  // namespace dscale
