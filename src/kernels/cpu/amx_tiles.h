#pragma once
// What the AMX kernels (gemm_bf16_amx.cc, gemm_int8_amx.cc) share: ldtilecfg's configuration
// block, the tiles' loading and release, and the sum tiles' store. Whether the CPU has AMX and the
// process may use the tiles is CpuFeatures' amx_bf16 and amx_int8 (cpu_features.h).

#include <cstdint>

namespace dscale::cpu {

// ldtilecfg's 64-byte block, palette 1: for each of the eight tile registers its rows and bytes
// per row (a register left at zero is unused).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};

  void Set(int tile, int tile_rows, int tile_bytes_per_row) {
    rows[tile] = static_cast<uint8_t>(tile_rows);
    bytes_per_row[tile] = static_cast<uint16_t>(tile_bytes_per_row);
  }
};

// ldtilecfg and tilerelease, for a thread's part of a call.
void LoadTileConfig(const TileConfig& config);
void ReleaseTiles();

// y[r, m] (rows `ldy` apart) = sums[m · 16 + r] for r < rows, m < outputs, or y += that when
// `accumulate`: a sum tile of 16 outputs × 16 rows, as tilestored leaves it, into a block of y.
// With AVX-512 (every AMX CPU has it): each row's column gathered at once, the same sums and adds.
void StoreTileSums(const float* sums, int64_t outputs, int64_t rows, float* y, int64_t ldy,
                   bool accumulate);

// run_tile(t) for every output tile t in [0, tiles), split statically among the OpenMP threads
// (one thread unless `parallel`), each thread with `config` loaded for its share.
template <typename RunTile>
void RunTilesInParallel(const TileConfig& config, int64_t tiles, bool parallel, RunTile run_tile) {
#pragma omp parallel if (parallel)
  {
    LoadTileConfig(config);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tiles; ++t) run_tile(t);
    ReleaseTiles();
  }
}

}  // namespace dscale::cpu
