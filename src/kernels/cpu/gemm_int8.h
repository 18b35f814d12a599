#pragma once
// y = x · dequant(w)ᵀ with 8-bit weights and f32 activations, accumulating in f32: the
// projections of `--weights int8`, which read about half the bytes of BF16 per decode step.
//
// Format. w[out, in] int8, row-major and dense; scales[out, groups] f32, groups = ⌈in / 32⌉.
// Weight (o, i) stands for w[o, i] · scales[o, i / 32]: symmetric, one scale per group of 32
// consecutive inputs of one output row. That is llama.cpp's Q8_0 granularity, so an 8-bit model
// here and a Q8_0 one there round the same weights to the same grid and compare fairly in speed
// and accuracy. When `in` is not a multiple of 32, each row's last group is shorter (in mod 32
// inputs) and has its own scale; groups never span two rows.
//
// Scales are f32, not Q8_0's f16: exact for every group (an f16 scale keeps 11 bits and turns
// subnormal for groups whose largest |w| is under 2⁻¹⁴·127 ≈ 7.8e-3, which small trained weights
// reach), and one broadcast load in every variant. They cost 1/8 byte per weight instead of 1/16:
// 6% more bytes per step than Q8_0.
//
// Up to LinearInt8TiledRowLimit rows: register tiles of 4 outputs × up to 6 rows, as in
// LinearBf16 (gemm_bf16.h), widen each weight vector once per tile (sign-extend, convert, times
// the group's scale) and apply it to every row of the tile; a tile of one row scales each group's
// partial sum instead, which saves a multiply per weight vector where no other row shares it.
// More rows: panels dequantised to f32 in cache and multiplied by OpenBLAS's sgemm. Variants for
// AVX-512, AVX2 + FMA and portable C++, picked at run time.
//
// Numerics: each term w·s·x is formed with at most two roundings — x times the dequantised
// weight fl(w·s) (DequantizeInt8Rows), or, in one-row tiles, w·x with the group's partial sum
// scaled exactly inside an FMA — and the terms are summed in f32. So each output is within
// γ_(in+1)·Σ|w·s·x| of the exact product with the weights w·s (float_bounds.h; γ_(in+2) with
// `accumulate`), one rounding per term more than an f32 kernel over the matrix fl(w·s)
// (WeightMatrix::ToF32) would cost.

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
