#include "kernels/cpu/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace dscale::cpu {
namespace {

// CPUID leaf 7's sub-leaves, zeros where the CPU has no such leaf.
struct Leaf7 {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Leaf7 ReadLeaf7(unsigned subleaf) {
  Leaf7 leaf;
  if (__get_cpuid_count(7, subleaf, &leaf.eax, &leaf.ebx, &leaf.ecx, &leaf.edx) == 0) return {};
  return leaf;
}

constexpr bool Bit(unsigned reg, int bit) { return ((reg >> bit) & 1u) != 0; }

CpuFeatures Detect() {
  __builtin_cpu_init();
  CpuFeatures cpu;
  cpu.avx = __builtin_cpu_supports("avx");
  cpu.avx2 = __builtin_cpu_supports("avx2");
  cpu.fma = __builtin_cpu_supports("fma");
  cpu.avx512f = __builtin_cpu_supports("avx512f");
  cpu.avx512bw = __builtin_cpu_supports("avx512bw");
  cpu.avx512cd = __builtin_cpu_supports("avx512cd");
  cpu.avx512dq = __builtin_cpu_supports("avx512dq");
  cpu.avx512vl = __builtin_cpu_supports("avx512vl");
  cpu.avx512_bf16 = __builtin_cpu_supports("avx512bf16");
  cpu.avx512_vnni = __builtin_cpu_supports("avx512vnni");
  // Read from cpuid rather than through __builtin_cpu_supports, whose names for them GCC 12 knows
  // and Clang 14 does not. AVX-VNNI: sub-leaf 1, EAX bit 4; its YMM state is AVX's. AMX: sub-leaf
  // 0, EDX bits 22 (AMX-BF16), 24 (AMX-TILE), 25 (AMX-INT8); the OS's part is the permission
  // CpuFeaturesFor asks for.
  cpu.avx_vnni = cpu.avx && Bit(ReadLeaf7(1).eax, 4);
  const unsigned amx = ReadLeaf7(0).edx;
  cpu.amx_bf16 = Bit(amx, 24) && Bit(amx, 22);
  cpu.amx_int8 = Bit(amx, 24) && Bit(amx, 25);
  // cpuid's vendor string, "AuthenticAMD".
  cpu.amd = __builtin_cpu_is("amd");
  return cpu;
}

// Linux's permission for this process to use the tile registers (ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA), requested on the first call.
bool TilesPermitted() {
  constexpr int kArchRequestXcompPermission = 0x1023;
  constexpr int kXfeatureTileData = 18;
  static const bool permitted =
      syscall(SYS_arch_prctl, kArchRequestXcompPermission, kXfeatureTileData) == 0;
  return permitted;
}

}  // namespace

const CpuFeatures& DetectedCpuFeatures() {
  static const CpuFeatures cpu = Detect();
  return cpu;
}

CpuFeatures CpuFeaturesFor(CpuIsaCap cap) {
  CpuFeatures features = CappedCpuFeatures(DetectedCpuFeatures(), cap);
  if ((features.amx_bf16 || features.amx_int8) && !TilesPermitted()) {
    features.amx_bf16 = false;
    features.amx_int8 = false;
  }
  return features;
}

const CpuFeatures& CpuFeaturesInUse() {
  static const CpuFeatures features = CpuFeaturesFor(CpuIsaCapFromEnvironment());
  return features;
}

std::string CpuFeaturesString(const CpuFeatures& features) {
  std::string names;
  for (const CpuFeature& feature : kCpuFeatureTable) {
    if (!(features.*feature.has)) continue;
    if (!names.empty()) names += ' ';
    names += feature.name;
  }
  return names.empty() ? "none" : names;
}

}  // namespace dscale::cpu
