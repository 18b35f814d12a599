#pragma once
// y = x · wᵀ with BF16 weights as stored in a checkpoint and f32 activations, accumulating in
// f32: the projection of a decode or verify step without an f32 copy of the weights.
//
// The activations are taken as they are (Bf16Activations::kF32) or each row is rounded to BF16
// once, to nearest even (kBf16): then every product is BF16 × BF16 (exact in f32) and the tiles
// use AVX512-BF16's dot products (vdpbf16ps: 32 products an instruction to an f32 FMA's 16,
// whether at the FMA's rate depends on the CPU: docs/BENCHMARKS.md) where the CPU has them, and
// f32 FMAs on the rounded values widened back where it has not — the same model, bits differing
// only in the order of the f32 sums (and vdpbf16ps flushing subnormals to zero). Either way a
// row's outputs are the same bits whatever rows share a tiled call, so a decode row and a
// verified row compute the same thing.
//
// Register tiles of a few outputs × a few rows widen each weight once per tile and apply it to all
// the tile's rows, and the threads split the output columns, so a call costs what reading the
// weights costs until the arithmetic dominates, and then runs near the FMA rate. Every row count
// runs the tiles — prefill's too, in blocks of rows that stay in L2 — and no path hands rows to
// a BLAS whose sum order depends on the matrix's shape: a row's bits never depend on how many
// rows share the call, which rows they are, or which thread computes it, so neither concurrency,
// verification, prompt chunking nor prefix caching can change a token (README, "Lossless").
//
// The tiles are compiled for AVX-512, for AVX2 + FMA and portably, and picked at run time from
// what the CPU supports (Bf16Isa, bf16_isa.h, names them for tests and benchmarks). Where the
// CPU has AMX, the BF16-activation mode runs every row count, prefill's too, on AMX tiles
// (gemm_bf16_amx.h) instead of the register tiles and sgemm.

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "kernels/cpu/bf16_isa.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/cpu_isa_cap.h"

namespace dscale::cpu {

// How LinearBf16 takes its f32 activations: as they are, or each rounded to BF16 once.
enum class Bf16Activations { kF32, kBf16 };
// "f32", "bf16": the spellings of `--activations`.
std::string_view Bf16ActivationsName(Bf16Activations activations);
std::optional<Bf16Activations> Bf16ActivationsFromName(std::string_view name);
// The mode BF16 weights run best in on this CPU under DSCALE_CPU_ISA's cap: kBf16 where BF16
// tiles are multiplied by AMX (a 16-row verify then costs about 1.3 plain steps instead of 2-2.6,
// a plain step the same) or by vdpbf16ps at the FMA's rate (HasFullRateAvx512Bf16: AMD Zen 4 and
// 5, a 16-row verify 2.1-2.9 plain steps against 2.75-2.9 in f32, and the f32 tiles' prefill the
// slower one); kF32 elsewhere, where BF16 activations did not beat it at verify rows
// (docs/BENCHMARKS.md, "BF16 activations on the CPU").
Bf16Activations PreferredBf16Activations();

// y[rows, out] = x[rows, in] · w[out, in]ᵀ (or y += that when `accumulate`); w holds BF16 bits in
// PyTorch's Linear layout, row-major and dense, any alignment. Rows of y are `ldy` floats apart
// (0: out), so a call can fill a column block of a wider y.
void LinearBf16(const float* x, const uint16_t* w, float* y, int64_t rows, int64_t in, int64_t out,
                bool accumulate = false, int64_t ldy = 0,
                Bf16Activations activations = Bf16Activations::kF32);

// The register tiles of one variant, for any row count (parity tests and benchmarks). The
// variant must be in SupportedBf16Isas().
void LinearBf16Tiled(Bf16Isa isa, const float* x, const uint16_t* w, float* y, int64_t rows,
                     int64_t in, int64_t out, bool accumulate);

// BF16 weights widened to f32 panels in cache and multiplied by OpenBLAS's sgemm: what many-row
// calls once ran, kept for benchmarks to compare against. Its rows' bits depend on the call's
// shape, so no product of the model runs it.
void LinearBf16WidenSgemm(const float* x, const uint16_t* w, float* y, int64_t rows, int64_t in,
                          int64_t out, bool accumulate);

// The variants of the BF16-activation tiles: the f32 tiles of a Bf16Isa over the rounded
// activations widened back (exact), AVX512-BF16's dot products on the rounded bits, or AMX's tile
// products (gemm_bf16_amx.h), which LinearBf16 runs for every row count where the CPU has them.
enum class Bf16DotIsa { kPortable, kAvx2, kAvx512, kAvx512Bf16, kAmx };
std::string_view Bf16DotIsaName(Bf16DotIsa isa);
// The variants this CPU can run under DSCALE_CPU_ISA's cap, portable first (listed once);
// LinearBf16 uses the last. The same under `cap` instead (tests), and for a CPU with `features`:
// SupportedBf16Isas(features)'s f32 tiles, then kAvx512Bf16 where HasAvx512Bf16(features), then
// kAmx where HasAmxBf16(features) too.
std::vector<Bf16DotIsa> SupportedBf16DotIsas();
std::vector<Bf16DotIsa> SupportedBf16DotIsas(CpuIsaCap cap);
std::vector<Bf16DotIsa> SupportedBf16DotIsas(const CpuFeatures& features);

// dst[0, n) = src[0, n) rounded to BF16, to nearest even (core/dtype.h's F32ToBf16, NaN kept a
// NaN), on the calling thread.
void RoundToBf16(const float* src, int64_t n, uint16_t* dst);

// LinearBf16 with Bf16Activations::kBf16 through the tiles of one variant, for any row count
// (parity tests and benchmarks); the variant must be in SupportedBf16DotIsas().
void LinearBf16DotTiled(Bf16DotIsa isa, const float* x, const uint16_t* w, float* y, int64_t rows,
                        int64_t in, int64_t out, bool accumulate);

}  // namespace dscale::cpu
