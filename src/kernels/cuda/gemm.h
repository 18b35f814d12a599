#pragma once
// Dense matrix products through cuBLAS (f32).

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace dscale::cuda {

// y[rows, out] = x[rows, in] · w[out, in]ᵀ, or y += that when `accumulate`. w uses PyTorch's
// Linear layout ([out, in], row-major). All f32, row-major, dense, device pointers.
//
// The product runs on `blas` (a cuBLAS handle the caller owns; one per thread) after binding it
// to `stream` and to host pointer mode. Full f32 accuracy needs the handle's default math mode:
// a handle switched to TF32 tensor-op math rounds the inputs to 10-bit mantissas.
// The shapes every product shares: checks that the sizes fit cuBLAS's 32-bit dimensions, and
// finishes the products that need no GEMM — no rows or outputs (nothing to write), or an empty
// inner dimension (y zeroed, or kept when accumulating; cuBLAS rejects a zero leading
// dimension). True when the product is done.
bool FinishDegenerateProduct(float* y, int64_t rows, int64_t in, int64_t out, bool accumulate,
                             cudaStream_t stream);

void Linear(cublasHandle_t blas, const float* x, const float* w, float* y, int64_t rows, int64_t in,
            int64_t out, bool accumulate, cudaStream_t stream);

}  // namespace dscale::cuda
