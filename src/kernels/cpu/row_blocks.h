#pragma once
// Blocks of rows for the tiled products (gemm_bf16.cc, gemm_int8.cc): every row count runs the
// same register tiles, so a row's bits never depend on the rows beside it, and many rows
// (prefill) are cut into blocks that each pass over the weights once, their activations still in
// cache (the tiles apply each weight to every row of a tile; a tile's rows re-read the block's
// activations per output group). Blocking never changes a result: each row is computed the same
// way in any block. And ForEachRowTile and WithRows: a call's rows in tiles, and a tile's row
// count as a template argument (the int8 and 4-bit tiles: gemm_int8_dot.cc, gemm_panels512.cc,
// gemm_int4_amx.cc).

#include <algorithm>
#include <cstdint>

namespace dscale::cpu {

// Rows per block at most: up to this many rows the tiles beat widening the weights for OpenBLAS's
// sgemm at the Qwen3-1.7B shape (128 on the 2-vCPU EPYC with AVX-512, docs/BENCHMARKS.md); past
// it the activations of a block (up to 2.9 MB at 6,144 inputs) no longer stay in L2 and the
// tiles slow to the rate they stream from L3 (docs/BENCHMARKS.md, "Measurements behind the
// kernels' constants"). A multiple of 12: whole tiles of 6 rows (AVX-512) and of 4 (AVX2).
inline constexpr int64_t kMaxRowBlock = 120;
inline constexpr int64_t kRowBlockQuantum = 12;

// Calls `block(r0, n)` for consecutive blocks [r0, r0 + n) covering [0, rows): the fewest blocks
// of at most kMaxRowBlock rows, each a multiple of kRowBlockQuantum but the last (so that no
// block is much shorter than the others: each pays a pass over the weights).
template <typename Block>
void ForRowBlocks(int64_t rows, const Block& block) {
  if (rows <= 0) return;
  const int64_t blocks = (rows + kMaxRowBlock - 1) / kMaxRowBlock;
  const int64_t per_block = (rows + blocks - 1) / blocks;
  const int64_t limit = (per_block + kRowBlockQuantum - 1) / kRowBlockQuantum * kRowBlockQuantum;
  for (int64_t r0 = 0; r0 < rows; r0 += limit) block(r0, std::min(limit, rows - r0));
}

// Rows [0, rows) in the fewest tiles of at most `max_height`, heights differing by at most one:
// tile(first row, height).
template <typename Tile>
inline void ForEachRowTile(int64_t rows, int max_height, Tile tile) {
  const int64_t tiles = (rows + max_height - 1) / max_height;
  for (int64_t t = 0, r = 0; t < tiles; ++t) {
    const int64_t height = rows / tiles + (t < rows % tiles ? 1 : 0);
    tile(r, static_cast<int>(height));
    r += height;
  }
}

// A tile's row count 1 … kMax as a template argument, so that the tile's loops over its rows
// unroll: run.template operator()<kRows>() with kRows = rows.
template <int kMax, typename Run>
inline void WithRows(int rows, Run run) {
  if constexpr (kMax > 1) {
    if (rows < kMax) return WithRows<kMax - 1>(rows, run);
  }
  run.template operator()<kMax>();
}

}  // namespace dscale::cpu
