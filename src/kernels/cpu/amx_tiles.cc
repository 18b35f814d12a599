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

__attribute__((target("avx512f"))) void StoreTileSums(const float* sums, int64_t outputs,
                                                      int64_t rows, float* y, int64_t ldy,
                                                      bool accumulate) {
  constexpr int kTileColumns = 16;
  // Row r's sums sit in column r of the tile: sums[m · 16 + r] for m = 0 … 15.
  const __m512i column =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(kTileColumns));
  const auto mask = static_cast<__mmask16>((1u << outputs) - 1u);
  for (int64_t r = 0; r < rows; ++r) {
    __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mask, column, sums + r, 4);
    float* yr = y + r * ldy;
    if (accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, yr), v);
    _mm512_mask_storeu_ps(yr, mask, v);
  }
}

}  // namespace dscale::cpu
