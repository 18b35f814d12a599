#pragma once
// Blocks of rows for the tiled products (gemm_bf16.cc, gemm_int8.cc): every row count runs the
// same register tiles, so a row's bits never depend on the rows beside it, and many rows
// (prefill) are cut into blocks whose activations stay in L2 while every weight tile passes over
// them — the tiles then run at their multiply rate rather than at the rate activations stream
// from L3. Blocking never changes a result: each row is computed the same way in any block.

#include <algorithm>
#include <cstdint>

namespace dscale::cpu {

// Activation bytes of one block: about half the L2 of the CPUs measured (1 MiB on Zen 4, 2 MiB
// on Sapphire Rapids), beside the weight tiles passing through.
inline constexpr int64_t kRowBlockBytes = int64_t{512} << 10;
// Rows per block are a multiple of this (whole tiles of 6 rows on AVX-512, 4 on AVX2), and at
// least it.
inline constexpr int64_t kRowBlockQuantum = 12;

// Calls `block(r0, n)` for consecutive blocks [r0, r0 + n) covering [0, rows), each of at most
// the rows whose `in` inputs of `x_bytes` bytes fit kRowBlockBytes (never fewer than
// kRowBlockQuantum).
template <typename Block>
void ForRowBlocks(int64_t rows, int64_t in, int64_t x_bytes, const Block& block) {
  const int64_t row_bytes = std::max<int64_t>(1, in * x_bytes);
  const int64_t limit = std::max<int64_t>(
      kRowBlockQuantum, kRowBlockBytes / row_bytes / kRowBlockQuantum * kRowBlockQuantum);
  for (int64_t r0 = 0; r0 < rows; r0 += limit) block(r0, std::min(limit, rows - r0));
}

}  // namespace dscale::cpu
