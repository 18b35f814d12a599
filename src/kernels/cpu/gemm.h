#pragma once
// Dense f32 matrix products: the model's projections with f32 weights (row-invariant register
// tiles, gemm_bf16.cc) and the DVL features' small products (OpenBLAS).

#include <cstdint>

#include "kernels/cpu/bf16_isa.h"

namespace dscale::cpu {

// For a product y[rows, out] (rows `ldy` floats apart) of an inner dimension `in`: whether
// nothing is left to compute — no rows or outputs, or no inputs, in which case y is set to zero
// unless `accumulate` (an empty sum adds nothing). Every linear kernel starts with it.
bool EmptyProductDone(float* y, int64_t rows, int64_t in, int64_t out, int64_t ldy,
                      bool accumulate);

// y[rows, out] = x[rows, in] · w[out, in]ᵀ, or y += that when `accumulate`.
// w uses PyTorch's Linear layout ([out, in], row-major). All f32, row-major, dense, except that
// rows of y are `ldy` floats apart (0: out), so a call can fill a column block of a wider y.
// Runs LinearF32Tiled with BestBf16Isa(): a row's bits never depend on the other rows of the
// call (as LinearBf16's, gemm_bf16.h).
void Linear(const float* x, const float* w, float* y, int64_t rows, int64_t in, int64_t out,
            bool accumulate = false, int64_t ldy = 0);

// Linear through the register tiles of one variant (which must be in SupportedBf16Isas()): the
// tiles of LinearBf16 with f32 weight loads, each output summed in the same order as there.
void LinearF32Tiled(Bf16Isa isa, const float* x, const float* w, float* y, int64_t rows, int64_t in,
                    int64_t out, bool accumulate = false, int64_t ldy = 0);

// y[rows, out] = x[rows, in] · w[in, out]: w stored input-major (as projection matrices are).
// All f32, row-major, dense, through OpenBLAS's sgemm, whose row bits may depend on the call's
// shape: only for products that choose how many rows to verify (the DVL features), never for
// what the model computes.
void MatMul(const float* x, const float* w, float* y, int64_t rows, int64_t in, int64_t out);

// y[m, n] = a[k, m]ᵀ · b[k, n]: the product over a's rows, a and b row-major and dense (the DVL
// logit projection folded through an LM head, dvl/features.h). OpenBLAS, as MatMul.
void MatMulTransposedA(const float* a, const float* b, float* y, int64_t k, int64_t m, int64_t n);

}  // namespace dscale::cpu
