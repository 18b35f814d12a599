#include "kernels/cuda/gemm.h"

#include <limits>

#include "core/check.h"
#include "kernels/cuda/cuda_check.h"

namespace dscale::cuda {
namespace {

// cuBLAS's classic API takes 32-bit dimensions.
bool FitsInt(int64_t n) { return n >= 0 && n <= std::numeric_limits<int>::max(); }

}  // namespace

bool FinishDegenerateProduct(float* y, int64_t rows, int64_t in, int64_t out, bool accumulate,
                             cudaStream_t stream) {
  DSCALE_CHECK(FitsInt(rows) && FitsInt(in) && FitsInt(out));
  if (rows == 0 || out == 0) return true;
  if (in != 0) return false;
  if (!accumulate) {
    DSCALE_CUDA_CHECK(
        cudaMemsetAsync(y, 0, static_cast<size_t>(rows * out) * sizeof(float), stream));
  }
  return true;
}

void Linear(cublasHandle_t blas, const float* x, const float* w, float* y, int64_t rows, int64_t in,
            int64_t out, bool accumulate, cudaStream_t stream) {
  if (FinishDegenerateProduct(y, rows, in, out, accumulate, stream)) return;
  DSCALE_CUBLAS_CHECK(Cublas().set_stream(blas, stream));
  DSCALE_CUBLAS_CHECK(Cublas().set_pointer_mode(blas, CUBLAS_POINTER_MODE_HOST));
  // cuBLAS is column-major, and a row-major matrix is its transpose read column-major: x is
  // xᵀ [in, rows], w is wᵀ [in, out] and y is yᵀ [out, rows], each with its row length as
  // leading dimension. So the row-major y = x·wᵀ is the column-major yᵀ = (wᵀ)ᵀ·xᵀ = w·xᵀ:
  // op(A) = transpose of the stored wᵀ, op(B) = the stored xᵀ, m = out, n = rows, k = in.
  const auto m = static_cast<int>(out);
  const auto n = static_cast<int>(rows);
  const auto k = static_cast<int>(in);
  const float alpha = 1.0f;
  const float beta = accumulate ? 1.0f : 0.0f;
  DSCALE_CUBLAS_CHECK(
      Cublas().sgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, w, k, x, k, &beta, y, m));
}

}  // namespace dscale::cuda
