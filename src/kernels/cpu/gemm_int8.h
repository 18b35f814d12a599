#pragma once
// y = x · dequant(w)ᵀ with 8-bit weights and f32 activations, accumulating in f32: the
// projections of `--weights int8`, which read about half the bytes of BF16 per decode step.
// Format: w[out, in] int8, row-major; scales[out, ⌈in / 32⌉] BF16 (Int8Scale: the top 16 bits of
// an f32); weight (o, i) stands for w[o, i] · scales[o, i / 32] (llama.cpp's Q8_0 groups, with
// BF16 scales where Q8_0 has FP16 ones; a row's last group may be shorter). Each output is within
// γ_(in+1)·Σ|w·s·x| of the exact product with the weights w·s (float_bounds.h; γ_(in+2) with
// `accumulate`). The format's reasons, the tiles and the rounding count: gemm_int8.cc.
//
// With Int8Activations::kInt8 (`--int8-activations int8`) the activations are quantised too, per
// 32 inputs, and every product is an int8 × int8 integer dot product (gemm_int8_dot.cc):
//   per row and group g: d_x = max|x| / 127, q_x = x / d_x rounded to nearest even (clamped to
//   ±127; an all-zero group gets d_x = 0, q_x = 0; a group holding a NaN or an infinity gets
//   d_x = NaN and q_x = 0, so every output of its row is NaN, as the f32 path's would not be
//   finite either);
//   per output: acc = 0, then for g = 0, 1, … in order acc = fma(fl(d_x · d_w), dot_g, acc), with
//   dot_g = Σ q_x · q_w over the group's inputs exact in int32 (|dot_g| ≤ 32 · 127² < 2²⁴, so
//   its conversion to f32 is exact too); y = acc (y = fl(y + acc) with `accumulate`).
// That order is fixed, so every variant (AMX, AVX512-VNNI, AVX-VNNI, AVX2, portable) gives the same
// bits for every row count, and a row's outputs never depend on the rows beside it: a decode
// row and a verified row compute the same model on every CPU. Every row count runs the tiles
// (no sgemm path), so prefill rows compute that model too. The weights must lie in [-127, 127]
// (the range of QuantizeInt8Weights, below): the AVX2 variant's int16 pair sums rely on it.

#include <bit>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "kernels/cpu/bf16_isa.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/cpu_isa_cap.h"

namespace dscale::cpu {

// Consecutive inputs of one output row that share a scale.
inline constexpr int64_t kInt8GroupSize = 32;

// Scales per output row: ⌈in / kInt8GroupSize⌉.
constexpr int64_t Int8Groups(int64_t in) { return (in + kInt8GroupSize - 1) / kInt8GroupSize; }

// A weight group's scale: BF16 bits, the value's f32 bits shifted right by 16 (exact: the weight
// quantiser picks scales BF16 can hold).
using Int8Scale = uint16_t;
inline float Int8ScaleValue(Int8Scale scale) {
  return std::bit_cast<float>(static_cast<uint32_t>(scale) << 16);
}
// The smallest BF16 value ≥ v (v finite and ≥ 0): rounding a scale up keeps every weight of its
// group within ±127 steps of it.
inline Int8Scale Int8ScaleAtLeast(float v) {
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  const uint32_t up = (bits & 0xffffu) != 0 ? bits + 0x10000u : bits;
  return static_cast<Int8Scale>(up >> 16);
}

// How LinearInt8 takes its f32 activations: as they are, or quantised per 32 inputs (above).
enum class Int8Activations { kF32, kInt8 };
// "f32", "int8": the spellings of `--int8-activations`.
std::string_view Int8ActivationsName(Int8Activations activations);
std::optional<Int8Activations> Int8ActivationsFromName(std::string_view name);

// Two layouts of a quantised matrix's values, this format's and the 4-bit one's (gemm_int4.h):
// - rows: each output row's values one after another (the format above);
// - panels: the outputs in panels of kQuantPanelOutputs (16), a panel's groups of 32 inputs one
//   after another, each group's bytes laid out as one vpdpbusd step of all 16 outputs takes them
//   (a 4-bit group: gemm_int4.h). Scales [panels, groups, 16], a group's 16 outputs together. A
//   matrix may start at any lane of its first panel (`first`), so a range of a matrix's outputs
//   is a view of it; lanes past its last output hold zero values and scale 0.
// The int8 panel: group g is kInt8PanelGroupBytes (512) bytes, byte 64s + 4l + b holding input
// 32g + 4s + b of the panel's output l (s < 8, l < 16, b < 4) as the unsigned byte w + 128
// (w XOR 0x80, the offset the VNNI kernels multiply by: gemm_int8_dot.cc); inputs past `in`
// hold w = 0. So 64 aligned bytes are one dot-product step of 16 outputs, read with no
// transposes, where the rows layout has each call transpose every group in registers.
enum class QuantLayout { kRows, kPanels };
// "rows", "panels".
std::string_view QuantLayoutName(QuantLayout layout);
inline constexpr int64_t kQuantPanelOutputs = 16;
inline constexpr int64_t kInt8PanelGroupBytes = kQuantPanelOutputs * kInt8GroupSize;
// The panels holding `outputs` outputs from lane `first` of the first; a panel's int8 bytes and
// (either format's) scales.
constexpr int64_t QuantPanels(int64_t first, int64_t outputs) {
  return (first + outputs + kQuantPanelOutputs - 1) / kQuantPanelOutputs;
}
constexpr int64_t Int8PanelBytes(int64_t in) { return Int8Groups(in) * kInt8PanelGroupBytes; }
constexpr int64_t QuantPanelScales(int64_t in) { return Int8Groups(in) * kQuantPanelOutputs; }

// An int8 matrix as it lies in memory (any alignment). kPanels: `values` are the panels' bytes
// (w + 128, above) and `first` the lane of the matrix's output 0 in the first panel (0 … 15).
struct Int8Matrix {
  const int8_t* values = nullptr;
  const Int8Scale* scales = nullptr;
  QuantLayout layout = QuantLayout::kRows;
  int64_t first = 0;
};

// The layout LinearInt8 reads fastest on this CPU (under DSCALE_CPU_ISA's cap) with `activations`:
// panels where they are int8 and the CPU's best int8 product is AVX512-VNNI (on the 2-vCPU Zen 4
// EPYC a layer's 16-row calls 1.3× faster, a decode row 1.1×: docs/BENCHMARKS.md, "int8 weights
// in panels"), rows elsewhere: AMX tiles, the 256-bit variants and f32 activations read rows (f32
// activations would copy every panel back to rows on every call).
QuantLayout PreferredInt8Layout(Int8Activations activations);

// The rows layout's w [rows, in] and scales [rows, Int8Groups(in)] in the panel layout from
// lane 0: panels [QuantPanels(0, rows), Int8PanelBytes(in)], panel_scales [QuantPanels(0, rows),
// QuantPanelScales(in)].
void PackInt8Panels(const int8_t* w, const Int8Scale* scales, int64_t rows, int64_t in,
                    int8_t* panels, Int8Scale* panel_scales);
// dst[n, in] and dst_scales[n, Int8Groups(in)]: outputs [o0, o0 + n) of w in the rows layout.
void Int8OutputsOf(const Int8Matrix& w, int64_t in, int64_t o0, int64_t n, int8_t* dst,
                   Int8Scale* dst_scales);

// y[rows, out] = x[rows, in] · dequant(w, scales)ᵀ (or y += that when `accumulate`); w and
// scales in the format above, any alignment. Rows of y are `ldy` floats apart (0: out), so a
// call can fill a column block of a wider y.
void LinearInt8(const float* x, const int8_t* w, const Int8Scale* scales, float* y, int64_t rows,
                int64_t in, int64_t out, bool accumulate = false, int64_t ldy = 0,
                Int8Activations activations = Int8Activations::kF32);

// The same for a matrix in either layout: the same bits. Panels run LinearInt8Panels512 where the
// CPU has AVX512-VNNI and the activations are int8, else chunks of outputs copied to the rows
// layout in cache.
void LinearInt8(const float* x, const Int8Matrix& w, float* y, int64_t rows, int64_t in,
                int64_t out, bool accumulate = false, int64_t ldy = 0,
                Int8Activations activations = Int8Activations::kF32);

// dst[rows, in] = the dequantised f32 values fl(w · s) (panels, WeightMatrix::RowToF32, tests).
void DequantizeInt8Rows(const int8_t* w, const Int8Scale* scales, int64_t rows, int64_t in,
                        float* dst);

// The register tiles come in the variants of bf16_isa.h (AVX2 + FMA; AVX-512 F + BW; portable):
// SupportedBf16Isas() lists those this CPU runs, and LinearInt8 uses BestBf16Isa() for every row
// count: a row's outputs are the same bits whatever rows share the call (and within a variant,
// whether it is computed alone or in a tile of several).

// The register tiles of one variant, for any row count (parity tests and benchmarks). The
// variant must be in SupportedBf16Isas().
void LinearInt8Tiled(Bf16Isa isa, const float* x, const int8_t* w, const Int8Scale* scales,
                     float* y, int64_t rows, int64_t in, int64_t out, bool accumulate);

// f32 weight panels in cache and OpenBLAS sgemm: what many-row calls once ran, kept for tests and
// benchmarks to compare against (its rows' bits depend on the call's shape; no product of the
// model runs it).
void LinearInt8DequantSgemm(const float* x, const int8_t* w, const Int8Scale* scales, float* y,
                            int64_t rows, int64_t in, int64_t out, bool accumulate);

// q[rows, in] and scales[rows, Int8Groups(in)] in this format from finite weights w[rows, in]
// (int8_quantize.cc; `--weights int8` at load): per group s = Int8ScaleAtLeast(max|w| / 127) and
// q = w / s rounded to nearest, ties to even, so every weight is within s/2 (plus float rounding)
// of its dequantised value, and the group's largest maps to ±127 or, where rounding s up took it
// below 126.5 steps, ±126; an all-zero group gets s = 0 and q = 0. On the calling thread, with
// AVX2 where the CPU has it unless `vector` is false (the same bits either way: parity tests).
void QuantizeInt8Weights(const float* w, int64_t rows, int64_t in, int8_t* q, Int8Scale* scales,
                         bool vector = true);

// ---- int8 × int8 (Int8Activations::kInt8; gemm_int8_dot.cc, the panel kernels gemm_panels512.cc,
// the quantisers int8_quantize.cc).

// x[rows, in] quantised as above: q[rows, Int8Groups(in) · 32] (each row padded with zeros to
// whole groups), scales[rows, Int8Groups(in)] (d_x) and sums[rows, Int8Groups(in)] (Σ q_x over
// each group, which the VNNI variants' offset needs); on the calling thread.
void QuantizeInt8Activations(const float* x, int64_t rows, int64_t in, int8_t* q, float* scales,
                             int32_t* sums);

// The variants of the int8 × int8 tiles: plain C++, AVX2 (vpmaddubsw + vpmaddwd), AVX-VNNI
// (256-bit vpdpbusd), AVX512-VNNI (512-bit vpdpbusd) and AMX (tdpbssd tiles, gemm_int8_amx.h).
// Every one gives the same bits.
enum class Int8DotIsa { kPortable, kAvx2, kAvxVnni, kAvx512Vnni, kAmx };
std::string_view Int8DotIsaName(Int8DotIsa isa);
// The variants this CPU can run under DSCALE_CPU_ISA's cap, portable first (listed once); the
// last is BestInt8DotIsa(). The same under `cap` instead (tests), and for a CPU with `features`:
// portable, and where it has AVX2 + FMA also AVX2, then AVX-VNNI, AVX512-VNNI (with AVX-512 F and
// BW) and AMX (HasAmxInt8) where it has them.
std::vector<Int8DotIsa> SupportedInt8DotIsas();
std::vector<Int8DotIsa> SupportedInt8DotIsas(CpuIsaCap cap);
std::vector<Int8DotIsa> SupportedInt8DotIsas(const CpuFeatures& features);
Int8DotIsa BestInt8DotIsa();
// Whether `isa` is among SupportedInt8DotIsas().
bool HasInt8DotIsa(Int8DotIsa isa);
// The variant LinearInt8 runs for a call of `rows` rows of `in` inputs: the best, except that
// AMX takes calls of kAmxInt8MinRows rows or more and AVX512-VNNI fewer (at one row AMX folds a
// tile of 16 × 16 sums for one row's worth of products), and that on AMX CPUs one row of at most
// kInt8OneRowAvx2MaxIn inputs runs the AVX2 variant, which reads each output's row front to back:
// from memory, on a 2-vCPU Sapphire Rapids class Xeon, it read 29.8-32.7 GB/s against
// AVX512-VNNI's 23.1-30.3 at 2,048-8,192 inputs (the LM heads of Qwen3 and Qwen3.5 1.04-1.31×
// faster), but 26.7 against 30.2 at 9,216 (docs/BENCHMARKS.md, "One int8 row on AMX CPUs"). Every
// variant gives the same bits, so the choice never changes a result.
inline constexpr int64_t kAmxInt8MinRows = 4;
inline constexpr int64_t kInt8OneRowAvx2MaxIn = 8192;
Int8DotIsa Int8DotIsaFor(int64_t rows, int64_t in);

// LinearInt8 with Int8Activations::kInt8 through one variant, which must be in
// SupportedInt8DotIsas() (parity tests and benchmarks). Rows of y are `ldy` floats apart (0: out).
void LinearInt8Dot(Int8DotIsa isa, const float* x, const int8_t* w, const Int8Scale* scales,
                   float* y, int64_t rows, int64_t in, int64_t out, bool accumulate,
                   int64_t ldy = 0);

// Activations already quantised by QuantizeInt8Activations: q [rows, groups · 32], scale and sum
// [rows, groups], groups = Int8Groups(in).
struct Int8ActivationRows {
  const int8_t* q = nullptr;
  const float* scale = nullptr;
  const int32_t* sum = nullptr;
  int64_t groups = 0;
};

// The calling thread's rows x[rows, in] quantised into buffers of its own, valid until its next
// call of this or of LinearInt8Dot (and readable by every thread meanwhile).
Int8ActivationRows QuantizeInt8ActivationRows(const float* x, int64_t rows, int64_t in);

// 4-bit weights (gemm_int4.h's format) × quantised activations on AVX512-VNNI, without unpacking:
// each group of 16 outputs' nibbles transposed in registers and multiplied at once, for calls of
// 1 … kInt4Vnni512MaxRows rows (a verify's rows in one pass over the weights). Whole panels of 16
// outputs only: returns the outputs done, a multiple of 16 (the caller runs the rest). Every
// output has the bits LinearInt8DotQuantized gives on the unpacked weights. The CPU must support
// Int8DotIsa::kAvx512Vnni.
inline constexpr int64_t kInt4Vnni512MaxRows = 16;
int64_t LinearInt4Vnni512(const Int8ActivationRows& xq, int64_t rows, const uint8_t* w4,
                          const Int8Scale* scales, int64_t in, int64_t out, float* y, int64_t ldy,
                          bool accumulate);

// The same on gemm_int4.h's panel layout, whose 16 outputs' nibbles lie as vpdpbusd takes them:
// outputs [0, out) of the panels from lane `first` (0 … 15) of the first, all of them (a panel's
// lanes outside them are computed and dropped). 1 … kInt4Vnni512MaxRows rows.
void LinearInt4Panels512(const Int8ActivationRows& xq, int64_t rows, const uint8_t* panels,
                         const Int8Scale* panel_scales, int64_t first, int64_t in, int64_t out,
                         float* y, int64_t ldy, bool accumulate);

// The same on int8 panels (above), for any number of rows ≥ 1: up to 16 rows take every group of
// a panel in one pass; more run in tiles of at most 16 over 32 groups at a time, which stay in
// L1 (the packed rows layout's scheme, with nothing to pack).
void LinearInt8Panels512(const Int8ActivationRows& xq, int64_t rows, const int8_t* panels,
                         const Int8Scale* panel_scales, int64_t first, int64_t in, int64_t out,
                         float* y, int64_t ldy, bool accumulate);

// One panel's part of LinearInt4Panels512: rows [r0, r0 + rows) (rows ≤ kInt4Vnni512MaxRows)
// against groups [g0, g0 + ng) of the panel at `panel` with its `scales`, into acc[rows][16] —
// from zero when `first`, else carried on from acc, so a panel's groups may come in chunks (the
// AMX tiles' last few rows, gemm_int4_amx.cc).
void Int4PanelGroups512(const Int8ActivationRows& xq, int64_t r0, int64_t rows,
                        const uint8_t* panel, const Int8Scale* scales, int64_t g0, int64_t ng,
                        float* acc, bool first);

// LinearInt8Dot on activations quantised once for several products (the int4 format's chunks,
// gemm_int4.h). Inside a parallel region it runs on the calling thread alone.
void LinearInt8DotQuantized(Int8DotIsa isa, const Int8ActivationRows& xq, int64_t rows,
                            const int8_t* w, const Int8Scale* scales, int64_t in, int64_t out,
                            float* y, int64_t ldy, bool accumulate);

}  // namespace dscale::cpu
