#include "kernels/cpu/amx_tiles.h"

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace dscale::cpu {
namespace {

constexpr int kArchRequestXcompPermission = 0x1023;
constexpr int kXfeatureTileData = 18;

// CPUID leaf 7, sub-leaf 0, EDX: AMX-BF16 bit 22, AMX-TILE bit 24, AMX-INT8 bit 25.
unsigned AmxFeatureBits() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return 0;
  return edx;
}

bool TilesPermitted() {
  static const bool permitted =
      ((AmxFeatureBits() >> 24) & 1u) != 0 &&
      syscall(SYS_arch_prctl, kArchRequestXcompPermission, kXfeatureTileData) == 0;
  return permitted;
}

}  // namespace

bool HasAmxBf16Tiles(CpuIsaCap cap) {
  return CpuIsaCapAllows(cap, CpuIsaCap::kAmx) && ((AmxFeatureBits() >> 22) & 1u) != 0 &&
         TilesPermitted();
}

bool HasAmxInt8Tiles(CpuIsaCap cap) {
  return CpuIsaCapAllows(cap, CpuIsaCap::kAmx) && ((AmxFeatureBits() >> 25) & 1u) != 0 &&
         TilesPermitted();
}

__attribute__((target("amx-tile"))) void LoadTileConfig(const TileConfig& config) {
  _tile_loadconfig(&config);
}

__attribute__((target("amx-tile"))) void ReleaseTiles() { _tile_release(); }

}  // namespace dscale::cpu
