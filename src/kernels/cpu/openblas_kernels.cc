#include "kernels/cpu/openblas_kernels.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace dscale::cpu {
namespace {

std::string Lower(std::string_view view) {
  std::string s(view);
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

std::string OpenBlasCoreName() {
  const char* name = openblas_get_corename();
  return name == nullptr ? std::string() : std::string(name);
}

OpenBlasSimd OpenBlasFamilySimd(std::string_view core_name) {
  struct Family {
    std::string_view name;
    OpenBlasSimd simd;
  };
  // OpenBLAS's x86-64 DYNAMIC_ARCH families, as openblas_get_corename() spells them, lowered.
  static constexpr Family kFamilies[] = {
      {"skylakex", OpenBlasSimd::kAvx512},
      {"cooperlake", OpenBlasSimd::kAvx512},
      {"sapphirerapids", OpenBlasSimd::kAvx512},
      {"haswell", OpenBlasSimd::kAvx2},
      {"zen", OpenBlasSimd::kAvx2},
      {"excavator", OpenBlasSimd::kAvx2},
      {"sandybridge", OpenBlasSimd::kAvx},
      {"bulldozer", OpenBlasSimd::kAvx},
      {"piledriver", OpenBlasSimd::kAvx},
      {"steamroller", OpenBlasSimd::kAvx},
      {"prescott", OpenBlasSimd::kSse},
      {"core2", OpenBlasSimd::kSse},
      {"penryn", OpenBlasSimd::kSse},
      {"dunnington", OpenBlasSimd::kSse},
      {"nehalem", OpenBlasSimd::kSse},
      {"atom", OpenBlasSimd::kSse},
      {"opteron", OpenBlasSimd::kSse},
      {"opteron_sse3", OpenBlasSimd::kSse},
      {"barcelona", OpenBlasSimd::kSse},
      {"bobcat", OpenBlasSimd::kSse},
      {"nano", OpenBlasSimd::kSse},
      {"katmai", OpenBlasSimd::kSse},
      {"coppermine", OpenBlasSimd::kSse},
      {"northwood", OpenBlasSimd::kSse},
      {"banias", OpenBlasSimd::kSse},
      {"athlon", OpenBlasSimd::kSse},
  };
  const std::string name = Lower(core_name);
  for (const Family& family : kFamilies) {
    if (family.name == name) return family.simd;
  }
  return OpenBlasSimd::kUnknown;
}

OpenBlasSimd CpuSimdForOpenBlas() { return CpuSimdForOpenBlas(CpuFeaturesInUse()); }

OpenBlasSimd CpuSimdForOpenBlas(CpuIsaCap cap) { return CpuSimdForOpenBlas(CpuFeaturesFor(cap)); }

OpenBlasSimd CpuSimdForOpenBlas(const CpuFeatures& features) {
  if (features.Avx512() && features.avx512cd && features.avx512dq && features.avx512vl) {
    return OpenBlasSimd::kAvx512;
  }
  if (features.Avx2Fma()) return OpenBlasSimd::kAvx2;
  return features.avx ? OpenBlasSimd::kAvx : OpenBlasSimd::kSse;
}

OpenBlasSimd OpenBlasSimdCap(CpuIsaCap cap) {
  switch (cap) {
    case CpuIsaCap::kPortable:
      return OpenBlasSimd::kSse;
    case CpuIsaCap::kAvx2:
      return OpenBlasSimd::kAvx2;
    case CpuIsaCap::kAvx512:
    case CpuIsaCap::kAmx:
      break;
  }
  return OpenBlasSimd::kAvx512;
}

std::string CappedOpenBlasCoreType(std::string_view chosen, CpuIsaCap cap) {
  const OpenBlasSimd loaded = OpenBlasFamilySimd(chosen);
  const OpenBlasSimd allowed = OpenBlasSimdCap(cap);
  if (loaded == OpenBlasSimd::kUnknown || loaded <= allowed) return "";
  return allowed == OpenBlasSimd::kAvx2 ? "Haswell" : "Prescott";
}

std::string BetterOpenBlasCoreType(std::string_view chosen, OpenBlasSimd cpu) {
  const OpenBlasSimd loaded = OpenBlasFamilySimd(chosen);
  if (loaded == OpenBlasSimd::kUnknown || cpu <= loaded) return "";
  switch (cpu) {
    case OpenBlasSimd::kAvx512:
      return "SkylakeX";
    case OpenBlasSimd::kAvx2:
      return "Haswell";
    case OpenBlasSimd::kAvx:
      return "Sandybridge";
    default:
      return "";
  }
}

std::string BetterOpenBlasCoreType() {
  return BetterOpenBlasCoreType(OpenBlasCoreName(), CpuSimdForOpenBlas());
}

void ReexecForMatchingOpenBlasKernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  const std::string chosen = OpenBlasCoreName();
  std::string core = CappedOpenBlasCoreType(chosen, CpuIsaCapFromEnvironment());
  if (core.empty()) core = BetterOpenBlasCoreType(chosen, CpuSimdForOpenBlas());
  if (core.empty()) return;
  if (setenv("OPENBLAS_CORETYPE", core.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE");  // exec failed: run on with the kernels already loaded
}

}  // namespace dscale::cpu
