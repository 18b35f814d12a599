#include "kernels/cpu/cpu_isa_cap.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace dscale::cpu {

std::string_view CpuIsaCapName(CpuIsaCap cap) {
  switch (cap) {
    case CpuIsaCap::kPortable:
      return "portable";
    case CpuIsaCap::kAvx2:
      return "avx2";
    case CpuIsaCap::kAvx512:
      return "avx512";
    case CpuIsaCap::kAmx:
      break;
  }
  return "amx";
}

Result<CpuIsaCap> ParseCpuIsaCap(std::string_view value) {
  if (value.empty()) return CpuIsaCap::kAmx;
  for (const CpuIsaCap cap :
       {CpuIsaCap::kPortable, CpuIsaCap::kAvx2, CpuIsaCap::kAvx512, CpuIsaCap::kAmx}) {
    if (value == CpuIsaCapName(cap)) return cap;
  }
  return InvalidArgument(std::string(kCpuIsaCapVariable) +
                         ": expected portable, avx2, avx512 or amx, got \"" + std::string(value) +
                         "\"");
}

CpuIsaCap CpuIsaCapFromEnvironment() {
  static const CpuIsaCap cap = [] {
    const char* value = std::getenv(kCpuIsaCapVariable);
    Result<CpuIsaCap> parsed = ParseCpuIsaCap(value == nullptr ? "" : value);
    if (!parsed.ok()) {
      std::fprintf(stderr, "dscale: %s\n", parsed.status().message().c_str());
      std::exit(2);
    }
    return *parsed;
  }();
  return cap;
}

}  // namespace dscale::cpu
