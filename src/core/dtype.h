#pragma once
// Element types found in checkpoints, and exact conversions between them and f32.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dscale {

enum class DType { kF32, kBF16, kF16 };

// Bytes per element.
size_t DTypeSize(DType dtype);
// Safetensors spelling: "F32", "BF16", "F16".
std::string_view DTypeName(DType dtype);
std::optional<DType> DTypeFromName(std::string_view name);

float Bf16ToF32(uint16_t bits);
// Round to nearest even; NaN stays NaN.
uint16_t F32ToBf16(float value);
float F16ToF32(uint16_t bits);
// Round to nearest even; overflow becomes infinity; NaN stays NaN.
uint16_t F32ToF16(float value);

// Index of the first NaN or infinity among `count` elements stored as `dtype` at `src` (any
// alignment), or −1 when every value is finite. A scan of the exponent bits at memory speed.
int64_t FirstNonFinite(DType dtype, const void* src, size_t count);

// Converts `count` elements stored as `dtype` at `src` (any alignment) into f32.
void ConvertToF32(DType dtype, const void* src, size_t count, float* dst);
// Converts `count` f32 values into `dtype` at `dst` (any alignment).
void ConvertFromF32(DType dtype, const float* src, size_t count, void* dst);

}  // namespace dscale
