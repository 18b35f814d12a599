#pragma once
// Dense matrix products through OpenBLAS.

#include <cstdint>

namespace dscale::cpu {

// For a product y[rows, out] (rows `ldy` floats apart) of an inner dimension `in`: whether
// nothing is left to compute — no rows or outputs, or no inputs, in which case y is set to zero
// unless `accumulate` (an empty sum adds nothing). Every linear kernel starts with it.
bool EmptyProductDone(float* y, int64_t rows, int64_t in, int64_t out, int64_t ldy,
                      bool accumulate);

// y[rows, out] = x[rows, in] · w[out, in]ᵀ, or y += that when `accumulate`.
// w uses PyTorch's Linear layout ([out, in], row-major). All f32, row-major, dense, except that
// rows of y are `ldy` floats apart (0: out), so a call can fill a column block of a wider y.
void Linear(const float* x, const float* w, float* y, int64_t rows, int64_t in, int64_t out,
            bool accumulate = false, int64_t ldy = 0);

// y[rows, out] = x[rows, in] · w[in, out]: w stored input-major (as projection matrices are).
// All f32, row-major, dense.
void MatMul(const float* x, const float* w, float* y, int64_t rows, int64_t in, int64_t out);

}  // namespace dscale::cpu
