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
  EXPECT_EQ(F32ToF16(1e6f), 0x7c00);  // overflow -> +inf
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

}  // namespace
}  // namespace dscale
