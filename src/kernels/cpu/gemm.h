#pragma once
// Dense matrix products through OpenBLAS.

#include <cstdint>

namespace dscale::cpu {

// y[rows, out] = x[rows, in] · w[out, in]ᵀ, or y += that when `accumulate`.
// w uses PyTorch's Linear layout ([out, in], row-major). All f32, row-major, dense.
void Linear(const float* x, const float* w, float* y, int64_t rows, int64_t in, int64_t out,
            bool accumulate = false);

// y[rows, out] = x[rows, in] · w[in, out]: w stored input-major (as projection matrices are).
// All f32, row-major, dense.
void MatMul(const float* x, const float* w, float* y, int64_t rows, int64_t in, int64_t out);

}  // namespace dscale::cpu
