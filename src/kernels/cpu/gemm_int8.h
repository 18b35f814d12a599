#pragma once
// y = x · dequant(w)ᵀ with 8-bit weights and f32 activations, accumulating in f32: the
// projections of `--weights int8`, which read about half the bytes of BF16 per decode step.
// Format: w[out, in] int8, row-major; scales[out, ⌈in / 32⌉] f32; weight (o, i) stands for
// w[o, i] · scales[o, i / 32] (llama.cpp's Q8_0 groups with f32 scales; a row's last group may
// be shorter). Each output is within γ_(in+1)·Σ|w·s·x| of the exact product with the weights w·s
// (float_bounds.h; γ_(in+2) with `accumulate`). The format's reasons, the tiles and the rounding
// count: gemm_int8.cc.

#include <cstdint>

#include "kernels/cpu/bf16_isa.h"

namespace dscale::cpu {

// Consecutive inputs of one output row that share a scale.
inline constexpr int64_t kInt8GroupSize = 32;

// Scales per output row: ⌈in / kInt8GroupSize⌉.
constexpr int64_t Int8Groups(int64_t in) { return (in + kInt8GroupSize - 1) / kInt8GroupSize; }

// y[rows, out] = x[rows, in] · dequant(w, scales)ᵀ (or y += that when `accumulate`); w and
// scales in the format above, any alignment. Rows of y are `ldy` floats apart (0: out), so a
// call can fill a column block of a wider y.
void LinearInt8(const float* x, const int8_t* w, const float* scales, float* y, int64_t rows,
                int64_t in, int64_t out, bool accumulate = false, int64_t ldy = 0);

// dst[rows, in] = the dequantised f32 values fl(w · s) (panels, WeightMatrix::RowToF32, tests).
void DequantizeInt8Rows(const int8_t* w, const float* scales, int64_t rows, int64_t in, float* dst);

// The register tiles come in the variants of bf16_isa.h (AVX2 + FMA; AVX-512 F + BW; portable):
// SupportedBf16Isas() lists those this CPU runs, and LinearInt8 uses BestBf16Isa().
// LinearInt8 runs calls of up to this many rows through the tiles of `isa`, more through
// dequantise-and-sgemm.
int64_t LinearInt8TiledRowLimit(Bf16Isa isa);

// The register tiles of one variant, for any row count (parity tests and benchmarks). The
// variant must be in SupportedBf16Isas().
void LinearInt8Tiled(Bf16Isa isa, const float* x, const int8_t* w, const float* scales, float* y,
                     int64_t rows, int64_t in, int64_t out, bool accumulate);

// The many-row path alone: f32 weight panels in cache and OpenBLAS sgemm (tests, benchmarks).
void LinearInt8DequantSgemm(const float* x, const int8_t* w, const float* scales, float* y,
                            int64_t rows, int64_t in, int64_t out, bool accumulate);

}  // namespace dscale::cpu
