#include "kv/kv_dtype.h"

namespace dscale {

int64_t KvDtypeSize(KvDtype dtype) { return dtype == KvDtype::kBf16 ? 2 : 4; }

std::string_view KvDtypeName(KvDtype dtype) { return dtype == KvDtype::kBf16 ? "bf16" : "f32"; }

std::optional<KvDtype> KvDtypeFromName(std::string_view name) {
  if (name == "bf16") return KvDtype::kBf16;
  if (name == "f32") return KvDtype::kF32;
  return std::nullopt;
}

}  // namespace dscale
