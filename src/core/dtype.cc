#include "core/dtype.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/check.h"

namespace dscale {
namespace {

uint32_t FloatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float BitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

uint16_t LoadU16(const void* src, size_t index) {
  uint16_t bits;
  std::memcpy(&bits, static_cast<const char*>(src) + 2 * index, 2);
  return bits;
}

void StoreU16(void* dst, size_t index, uint16_t bits) {
  std::memcpy(static_cast<char*>(dst) + 2 * index, &bits, 2);
}

}  // namespace

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kBF16:
    case DType::kF16: return 2;
  }
  DSCALE_CHECK_MSG(false, "unknown dtype");
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
  }
  DSCALE_CHECK_MSG(false, "unknown dtype");
}

std::optional<DType> DTypeFromName(std::string_view name) {
  if (name == "F32") return DType::kF32;
  if (name == "BF16") return DType::kBF16;
  if (name == "F16") return DType::kF16;
  return std::nullopt;
}

float Bf16ToF32(uint16_t bits) { return BitsToFloat(static_cast<uint32_t>(bits) << 16); }

uint16_t F32ToBf16(float value) {
  uint32_t bits = FloatBits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float F16ToF32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    if (mantissa == 0) return BitsToFloat(sign);
    // Subnormal: normalise into an f32 normal.
    int shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3ffu;
    return BitsToFloat(sign | static_cast<uint32_t>(127 - 15 - shift + 1) << 23 | mantissa << 13);
  }
  if (exponent == 31) return BitsToFloat(sign | 0x7f800000u | mantissa << 13);
  return BitsToFloat(sign | (exponent + 127 - 15) << 23 | mantissa << 13);
}

uint16_t F32ToF16(float value) {
  const uint32_t bits = FloatBits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return sign | 0x7e00u;       // NaN
  if (abs_bits >= 0x477ff000u) return sign | 0x7c00u;      // rounds to >= 65520: infinity
  if (abs_bits < 0x38800000u) {                            // below the smallest f16 normal
    // Subnormal or zero: add the implicit bit and shift into place with round-to-nearest-even.
    const int exponent = static_cast<int>(abs_bits >> 23);
    if (exponent < 102) return sign;  // below half the smallest subnormal
    const uint32_t mantissa = (abs_bits & 0x7fffffu) | 0x800000u;
    const int shift = 126 - exponent;  // 14 + (113 - exponent) - 1 + 1
    const uint32_t half = 1u << (shift - 1);
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    uint32_t result = mantissa >> shift;
    if (rest > half || (rest == half && (result & 1u))) ++result;
    return sign | static_cast<uint16_t>(result);
  }
  // Normal: rebias the exponent, round the mantissa to 10 bits (nearest even).
  const uint32_t rebased = abs_bits - (static_cast<uint32_t>(127 - 15) << 23);
  const uint32_t rounding = 0xfffu + ((rebased >> 13) & 1u);
  return sign | static_cast<uint16_t>((rebased + rounding) >> 13);
}

namespace {

// Whether any of the `Lane` elements [begin, end) at src has all of `exponent`'s bits set.
// Eight bytes at a time, every lane at once: y = (v & e) ^ e is zero exactly in a lane whose
// exponent bits are all ones, and no lane of y has its top bit set (no exponent mask does), so
// y − 1 per lane sets a lane's top bit only where that lane is zero: a lane that is not zero
// holds at least the lowest bit of its exponent mask (0x80 for BF16), so even the borrow from a
// zero lane below leaves its top bit clear. (GCC 12 at -O2 does not vectorise the plain loop.)
template <typename Lane>
bool AnyExponentAllOnes(const std::byte* src, int64_t begin, int64_t end, Lane exponent) {
  constexpr int kLanes = static_cast<int>(sizeof(uint64_t) / sizeof(Lane));
  constexpr int kLaneBits = 8 * static_cast<int>(sizeof(Lane));
  uint64_t e = 0, ones = 0, tops = 0;
  for (int l = 0; l < kLanes; ++l) {
    e |= uint64_t{exponent} << (l * kLaneBits);
    ones |= uint64_t{1} << (l * kLaneBits);
    tops |= uint64_t{1} << (l * kLaneBits + kLaneBits - 1);
  }
  uint64_t found = 0;
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    uint64_t v;
    std::memcpy(&v, src + i * int64_t{sizeof(Lane)}, sizeof v);
    const uint64_t y = (v & e) ^ e;
    found |= (y - ones) & ~y & tops;
  }
  for (; i < end; ++i) {
    Lane v;
    std::memcpy(&v, src + i * int64_t{sizeof(Lane)}, sizeof v);
    if ((v & exponent) == exponent) return true;
  }
  return found != 0;
}

}  // namespace

int64_t FirstNonFinite(DType dtype, const void* src, size_t count) {
  // A value is NaN or infinite exactly when its exponent bits are all ones. Blocks are scanned
  // branch-free on the threads; a block that fails is searched for its first bad element, and
  // the lowest such index wins.
  const auto first_with = [&]<typename Lane>(Lane exponent) -> int64_t {
    constexpr int64_t kBlock = 4096;
    const auto* bytes = static_cast<const std::byte*>(src);
    const auto n = static_cast<int64_t>(count);
    int64_t first = n;
#pragma omp parallel for schedule(static) reduction(min : first) if (n >= (int64_t{1} << 20))
    for (int64_t begin = 0; begin < n; begin += kBlock) {
      const int64_t end = std::min(n, begin + kBlock);
      if (!AnyExponentAllOnes(bytes, begin, end, exponent)) continue;
      for (int64_t i = begin; i < end; ++i) {
        Lane v;
        std::memcpy(&v, bytes + i * int64_t{sizeof(Lane)}, sizeof v);
        if ((v & exponent) == exponent) {
          first = std::min(first, i);
          break;
        }
      }
    }
    return first == n ? -1 : first;
  };
  switch (dtype) {
    case DType::kF32:
      return first_with(uint32_t{0x7F800000});
    case DType::kBF16:
      return first_with(uint16_t{0x7F80});
    case DType::kF16:
      return first_with(uint16_t{0x7C00});
  }
  return -1;
}

void ConvertToF32(DType dtype, const void* src, size_t count, float* dst) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, count * sizeof(float));
      return;
    case DType::kBF16:
      // Vectorised (see FirstNonFinite): `--weights int8` widens every BF16 row at load.
#pragma omp simd
      for (size_t i = 0; i < count; ++i) dst[i] = Bf16ToF32(LoadU16(src, i));
      return;
    case DType::kF16:
      for (size_t i = 0; i < count; ++i) dst[i] = F16ToF32(LoadU16(src, i));
      return;
  }
}

void ConvertFromF32(DType dtype, const float* src, size_t count, void* dst) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, count * sizeof(float));
      return;
    case DType::kBF16:
      for (size_t i = 0; i < count; ++i) StoreU16(dst, i, F32ToBf16(src[i]));
      return;
    case DType::kF16:
      for (size_t i = 0; i < count; ++i) StoreU16(dst, i, F32ToF16(src[i]));
      return;
  }
}

}  // namespace dscale
