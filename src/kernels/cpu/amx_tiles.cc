#include "kernels/cpu/amx_tiles.h"

#include <immintrin.h>

#include "kernels/cpu/isa_targets.h"

namespace dscale::cpu {

DSCALE_AMX_TILE void LoadTileConfig(const TileConfig& config) { _tile_loadconfig(&config); }

DSCALE_AMX_TILE void ReleaseTiles() { _tile_release(); }

DSCALE_AVX512 void StoreTileSums(const float* sums, int64_t outputs, int64_t rows, float* y,
                                 int64_t ldy, bool accumulate) {
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
