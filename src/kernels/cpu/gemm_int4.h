#pragma once
// y = x · dequant(w)ᵀ with 4-bit weights: the projections of `--weights int4`, which read about
// half the bytes of `--weights int8` per decode step (0.56 bytes a weight against 1.06).
//
// Two layouts of the same values (QuantLayout):
// - rows: per output row, Int8Groups(in) groups of 16 bytes, Int4RowBytes(in) bytes in all;
//   byte j of group g holds the weight of input 32g + j in its low nibble and that of input
//   32g + 16 + j in its high one, each as q + 8 with q in [-7, 7] (llama.cpp's Q4_0 order; a
//   row's last group is padded with q = 0). scales[out, Int8Groups(in)] are the int8 format's
//   BF16 scales (gemm_int8.h): weight (o, i) stands for q · scales[o, i / 32].
// - panels: the outputs in panels of kQuantPanelOutputs (16), a panel's groups one after another,
//   kInt4PanelGroupBytes (256) each: byte 64s + 4l + b of a panel's group is byte 4s + b of that
//   group of the panel's output l in the rows layout (s, b < 4; l < 16). So 64 aligned bytes hold
//   one dot-product step of all 16 outputs — the nibbles of inputs 4s … 4s + 3 (low) and
//   16 + 4s … (high) — as vpdpbusd takes them, and a panel is read front to back with no
//   shuffles: CPUs with AVX512-VNNI read it at nearly their bandwidth (gemm_int4.cc). Scales
//   [panels, groups, 16], a group's 16 outputs together. A matrix may start at any lane of its
//   first panel (Int4Matrix::first), so a range of a matrix's outputs is a view of it; lanes past
//   the matrix's last output hold q = 0 and scale 0.
//
// An int4 matrix is the int8 matrix with the same scales and the values q, so the products run
// the int8 kernels: each thread unpacks a chunk of outputs into int8 in cache (UnpackInt4Outputs)
// and multiplies it as LinearInt8 would, with the same activations mode; with int8 activations,
// few rows multiply the nibbles as they lie instead (rows: AVX2 fused, or up to 16 rows on CPUs
// with AVX512-VNNI: LinearInt4Vnni512; panels: LinearInt4Panels512), and more rows on CPUs with
// AMX run its tiles, each group of 16 outputs unpacked once for all of them (LinearAmxInt4), with
// the int8 kernels' terms in their order. Every output therefore has the bits LinearInt8 gives on
// the unpacked matrix, on every CPU, for every row count and either layout: a decode row and a
// verified row compute the same model, and the int8 format's bounds hold.

#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/cpu/gemm_int8.h"

namespace dscale::cpu {

// Bytes of one packed row of `in` weights.
constexpr int64_t Int4RowBytes(int64_t in) { return Int8Groups(in) * (kInt8GroupSize / 2); }

// The largest magnitude of a quantised 4-bit value: the range is symmetric, so −8 is unused.
inline constexpr int kInt4Max = 7;

// The panel layout's bytes per group of a panel (above; the panels themselves: gemm_int8.h).
inline constexpr int64_t kInt4PanelGroupBytes = kQuantPanelOutputs * (kInt8GroupSize / 2);

// The layout LinearInt4 reads fastest on this CPU (under DSCALE_CPU_ISA's cap): panels where the
// CPU has AVX512-VNNI, rows elsewhere (the fused AVX2 kernel reads rows one output at a time).
QuantLayout PreferredInt4Layout();

// A 4-bit matrix as it lies in memory (any alignment).
struct Int4Matrix {
  const uint8_t* values = nullptr;
  const Int8Scale* scales = nullptr;
  QuantLayout layout = QuantLayout::kRows;
  // kPanels: the lane of the matrix's output 0 in the first panel (0 … 15).
  int64_t first = 0;
};

// A panel's bytes.
constexpr int64_t Int4PanelBytes(int64_t in) { return Int8Groups(in) * kInt4PanelGroupBytes; }

// The rows layout's w4 [rows, Int4RowBytes(in)] and scales [rows, Int8Groups(in)] in the panel
// layout from lane 0: panels [QuantPanels(0, rows), Int4PanelBytes(in)], panel_scales
// [QuantPanels(0, rows), QuantPanelScales(in)], the last panel's spare lanes q = 0, scale 0.
void PackInt4Panels(const uint8_t* w4, const Int8Scale* scales, int64_t rows, int64_t in,
                    uint8_t* panels, Int8Scale* panel_scales);

// Output `o` of w in the rows layout: Int4RowBytes(in) bytes into row, Int8Groups(in) scales.
void Int4RowOf(const Int4Matrix& w, int64_t in, int64_t o, uint8_t* row, Int8Scale* scales);

// dst[n, in] = the values q of w's outputs [o0, o0 + n) as int8 (the int8 format's layout) and
// dst_scales[n, Int8Groups(in)] their scales; vector code where the CPU has it unless `vector`
// is false (the same bytes either way).
void UnpackInt4Outputs(const Int4Matrix& w, int64_t in, int64_t o0, int64_t n, int8_t* dst,
                       Int8Scale* dst_scales, bool vector = true);

// y[rows, out] = x[rows, in] · dequant(w4, scales)ᵀ (or y += that when `accumulate`); rows of y
// are `ldy` floats apart (0: out).
void LinearInt4(const float* x, const uint8_t* w4, const Int8Scale* scales, float* y, int64_t rows,
                int64_t in, int64_t out, bool accumulate = false, int64_t ldy = 0,
                Int8Activations activations = Int8Activations::kF32);
// The same for a matrix in either layout.
void LinearInt4(const float* x, const Int4Matrix& w, float* y, int64_t rows, int64_t in,
                int64_t out, bool accumulate = false, int64_t ldy = 0,
                Int8Activations activations = Int8Activations::kF32);

// The kernels LinearInt4 chooses among by the call's rows and the CPU (gemm_int4.cc says which
// and why). Every one gives the bits LinearInt8 gives on the unpacked matrix.
enum class Int4Kernel {
  kUnpacked,   // chunks of outputs unpacked to int8, the int8 kernel of the activations mode
  kFused,      // AVX2: one output's nibbles at a time, up to 7 rows a pass
  kVnni512,    // AVX512-VNNI: 16 outputs' nibbles transposed in registers, up to 16 rows a pass
  kPanels512,  // AVX512-VNNI on the panel layout: 16 outputs' nibbles as they lie, 16 rows a pass
  kAmx,        // AMX tiles: each group of 16 outputs unpacked once for every row
};
std::string_view Int4KernelName(Int4Kernel kernel);
// Whether `kernel` reads matrices in `layout` (kFused and kVnni512 read rows, kPanels512 panels,
// the others either).
bool Int4KernelReads(Int4Kernel kernel, QuantLayout layout);
// The kernels this CPU runs under DSCALE_CPU_ISA's cap, kUnpacked first.
std::vector<Int4Kernel> SupportedInt4Kernels();

// LinearInt4 through one kernel (parity tests and benchmarks), which must be in
// SupportedInt4Kernels(), read w's layout and, but for kUnpacked, take int8 activations.
void LinearInt4Via(Int4Kernel kernel, const float* x, const Int4Matrix& w, float* y, int64_t rows,
                   int64_t in, int64_t out, bool accumulate, int64_t ldy = 0,
                   Int8Activations activations = Int8Activations::kInt8);

// dst[rows, in] = the values q of w4's rows as int8 (the int8 format's layout: rows `in` apart);
// with AVX2 where the CPU has it unless `vector` is false (the same bytes either way).
void UnpackInt4Rows(const uint8_t* w4, int64_t rows, int64_t in, int8_t* dst, bool vector = true);

// dst[rows, in] = the dequantised f32 values fl(q · s).
void DequantizeInt4Rows(const uint8_t* w4, const Int8Scale* scales, int64_t rows, int64_t in,
                        float* dst);

// w4[rows, Int4RowBytes(in)] and scales[rows, Int8Groups(in)] from finite weights w[rows, in]
// (int8_quantize.cc; `--weights int4` at load): QuantizeInt8Weights' rounding with 7 in place
// of 127 — per group s = Int8ScaleAtLeast(max|w| / 7), q = w / s rounded to nearest, ties to
// even, so every weight is within s/2 (plus float rounding) of its dequantised value. On the
// calling thread, AVX2 where the CPU has it unless `vector` is false (the same bytes either way).
void QuantizeInt4Weights(const float* w, int64_t rows, int64_t in, uint8_t* w4, Int8Scale* scales,
                         bool vector = true);

}  // namespace dscale::cpu
