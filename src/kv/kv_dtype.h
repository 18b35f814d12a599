#pragma once
// The element type a KV cache stores its K and V rows in. BF16 (the default) halves the cache's
// memory and the bytes attention reads per position; each stored value is the f32 K or V
// rounded to nearest even (core/dtype.h), within 2⁻⁸ relative of it. F32 keeps them exact.

#include <cstdint>
#include <optional>
#include <string_view>

namespace dscale {

enum class KvDtype { kBf16, kF32 };

// Bytes per stored K or V element.
int64_t KvDtypeSize(KvDtype dtype);
// Command-line spelling: "bf16", "f32".
std::string_view KvDtypeName(KvDtype dtype);
std::optional<KvDtype> KvDtypeFromName(std::string_view name);

}  // namespace dscale
