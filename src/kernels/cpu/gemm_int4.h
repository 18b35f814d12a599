#pragma once
// y = x · dequant(w)ᵀ with 4-bit weights: the projections of `--weights int4`, which read about
// half the bytes of `--weights int8` per decode step (0.56 bytes a weight against 1.06).
//
// Format: per output row, Int8Groups(in) groups of 16 bytes, Int4RowBytes(in) bytes in all;
// byte j of group g holds the weight of input 32g + j in its low nibble and that of input
// 32g + 16 + j in its high one, each as q + 8 with q in [-7, 7] (llama.cpp's Q4_0 order; a row's
// last group is padded with q = 0). scales[out, Int8Groups(in)] are the int8 format's BF16 scales
// (gemm_int8.h): weight (o, i) stands for q · scales[o, i / 32].
//
// An int4 matrix is the int8 matrix with the same scales and the values q, so the products run
// the int8 kernels: each thread unpacks a chunk of outputs into int8 in cache (UnpackInt4Rows)
// and multiplies it as LinearInt8 would, with the same activations mode; with int8 activations,
// few rows multiply the nibbles as they lie instead (AVX2; up to 16 rows on CPUs with AVX512-VNNI:
// LinearInt4Vnni512), and more rows on CPUs with AMX run its tiles, each tile of 16 outputs
// unpacked once for all of them (LinearAmxInt4), with the int8 kernels' terms in their order.
// Every output therefore has the bits LinearInt8 gives on the unpacked matrix, on every CPU, for
// every row count: a decode row and a verified row compute the same model, and the int8
// format's bounds hold.

#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/cpu/gemm_int8.h"

namespace dscale::cpu {

// Bytes of one packed row of `in` weights.
constexpr int64_t Int4RowBytes(int64_t in) { return Int8Groups(in) * (kInt8GroupSize / 2); }

// The largest magnitude of a quantised 4-bit value: the range is symmetric, so −8 is unused.
inline constexpr int kInt4Max = 7;

// y[rows, out] = x[rows, in] · dequant(w4, scales)ᵀ (or y += that when `accumulate`); rows of y
// are `ldy` floats apart (0: out).
void LinearInt4(const float* x, const uint8_t* w4, const Int8Scale* scales, float* y, int64_t rows,
                int64_t in, int64_t out, bool accumulate = false, int64_t ldy = 0,
                Int8Activations activations = Int8Activations::kF32);

// The kernels LinearInt4 chooses among by the call's rows and the CPU (gemm_int4.cc says which
// and why). Every one gives the bits LinearInt8 gives on the unpacked matrix.
enum class Int4Kernel {
  kUnpacked,  // chunks of outputs unpacked to int8, the int8 kernel of the activations mode
  kFused,     // AVX2: one output's nibbles at a time, up to 7 rows a pass
  kVnni512,   // AVX512-VNNI: 16 outputs' nibbles transposed in registers, up to 16 rows a pass
  kAmx,       // AMX tiles: each tile of 16 outputs unpacked once for every row
};
std::string_view Int4KernelName(Int4Kernel kernel);
// The kernels this CPU runs under DSCALE_CPU_ISA's cap, kUnpacked first.
std::vector<Int4Kernel> SupportedInt4Kernels();

// LinearInt4 through one kernel (parity tests and benchmarks), which must be in
// SupportedInt4Kernels() and, but for kUnpacked, take int8 activations.
void LinearInt4Via(Int4Kernel kernel, const float* x, const uint8_t* w4, const Int8Scale* scales,
                   float* y, int64_t rows, int64_t in, int64_t out, bool accumulate,
                   int64_t ldy = 0, Int8Activations activations = Int8Activations::kInt8);

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
