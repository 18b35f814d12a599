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

// What OpenBLAS's SkylakeX kernels use.
bool HasAvx512ForOpenBlas() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
}

}  // namespace

std::string OpenBlasCoreName() {
  const char* name = openblas_get_corename();
  return name == nullptr ? std::string() : std::string(name);
}

std::string BetterOpenBlasCoreType(std::string_view chosen, bool has_avx512) {
  const std::string name = Lower(chosen);
  const bool avx2_family = name == "haswell" || name == "zen";
  return avx2_family && has_avx512 ? "SkylakeX" : "";
}

std::string BetterOpenBlasCoreType() {
  return BetterOpenBlasCoreType(OpenBlasCoreName(), HasAvx512ForOpenBlas());
}

void ReexecForFasterOpenBlasKernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  const std::string better = BetterOpenBlasCoreType();
  if (better.empty()) return;
  if (setenv("OPENBLAS_CORETYPE", better.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE");  // exec failed: run on with the kernels already loaded
}

}  // namespace dscale::cpu
