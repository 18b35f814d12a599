#pragma once
// y = x · wᵀ with BF16 weights as stored in a checkpoint and f32 activations, accumulating in
// f32: the projection of a decode or verify step without an f32 copy of the weights.
//
// Up to LinearBf16TiledRowLimit rows (decoding, verification, short prefills): register tiles of
// a few outputs × a few rows widen each weight once per tile and apply it to all the tile's rows,
// and the threads split the output columns, so a call costs what reading the weights costs until
// the arithmetic dominates, and then runs near the FMA rate. More rows (prefill): panels of
// weights are widened to f32 in cache and multiplied by OpenBLAS's sgemm.
//
// The tiles are compiled for AVX-512, for AVX2 + FMA and portably, and picked at run time from
// what the CPU supports (Bf16Isa, bf16_isa.h, names them for tests and benchmarks).

#include <cstdint>

#include "kernels/cpu/bf16_isa.h"

namespace dscale::cpu {

// y[rows, out] = x[rows, in] · w[out, in]ᵀ (or y += that when `accumulate`); w holds BF16 bits in
// PyTorch's Linear layout, row-major and dense, any alignment. Rows of y are `ldy` floats apart
// (0: out), so a call can fill a column block of a wider y.
void LinearBf16(const float* x, const uint16_t* w, float* y, int64_t rows, int64_t in, int64_t out,
                bool accumulate = false, int64_t ldy = 0);

// LinearBf16 runs calls of up to this many rows through the tiles of `isa`, more through
// widen-and-sgemm.
int64_t LinearBf16TiledRowLimit(Bf16Isa isa);

// The register tiles of one variant, for any row count (parity tests and benchmarks). The
// variant must be in SupportedBf16Isas().
void LinearBf16Tiled(Bf16Isa isa, const float* x, const uint16_t* w, float* y, int64_t rows,
                     int64_t in, int64_t out, bool accumulate);

// The many-row path alone: f32 weight panels in cache and OpenBLAS sgemm (benchmarks).
void LinearBf16WidenSgemm(const float* x, const uint16_t* w, float* y, int64_t rows, int64_t in,
                          int64_t out, bool accumulate);

}  // namespace dscale::cpu
