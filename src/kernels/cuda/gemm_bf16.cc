#include "kernels/cuda/gemm_bf16.h"

#include <utility>

#include "core/check.h"
#include "kernels/cuda/gemm.h"

namespace dscale::cuda {

GemmContext::GemmContext() : workspace_(kWorkspaceBytes) {
  DSCALE_CUBLAS_CHECK(Cublas().create(&handle_));
}

GemmContext::~GemmContext() {
  // Destroying can only fail once the device is lost; there is nothing left to do then.
  if (handle_ != nullptr) static_cast<void>(Cublas().destroy(handle_));
}

GemmContext::GemmContext(GemmContext&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), workspace_(std::move(other.workspace_)) {}

GemmContext& GemmContext::operator=(GemmContext&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) static_cast<void>(Cublas().destroy(handle_));
    handle_ = std::exchange(other.handle_, nullptr);
    workspace_ = std::move(other.workspace_);
  }
  return *this;
}

cublasHandle_t GemmContext::BindTo(cudaStream_t stream) const {
  DSCALE_CHECK_MSG(handle_ != nullptr, "use of a moved-from GemmContext");
  DSCALE_CUBLAS_CHECK(Cublas().set_stream(handle_, stream));
  // After cublasSetStream, which resets the workspace to cuBLAS's pool (see gemm_bf16.h).
  DSCALE_CUBLAS_CHECK(Cublas().set_workspace(handle_, const_cast<std::byte*>(workspace_.data()),
                                             workspace_.bytes()));
  DSCALE_CUBLAS_CHECK(Cublas().set_pointer_mode(handle_, CUBLAS_POINTER_MODE_HOST));
  return handle_;
}

void LinearBf16(const GemmContext& gemm, const Bf16* x, const Bf16* w, float* y, int64_t rows,
                int64_t in, int64_t out, bool accumulate, cudaStream_t stream) {
  if (FinishDegenerateProduct(y, rows, in, out, accumulate, stream)) return;
  const cublasHandle_t blas = gemm.BindTo(stream);
  // The transpose identity of gemm.cc's f32 Linear: the row-major y = x·wᵀ is the column-major
  // yᵀ = w·xᵀ, with op(A) = the transpose of the stored wᵀ [in, out], op(B) = the stored xᵀ
  // [in, rows], m = out, n = rows, k = in, each leading dimension a row length.
  const auto m = static_cast<int>(out);
  const auto n = static_cast<int>(rows);
  const auto k = static_cast<int>(in);
  const float alpha = 1.0f;
  const float beta = accumulate ? 1.0f : 0.0f;
  DSCALE_CUBLAS_CHECK(Cublas().gemm_ex(blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, w,
                                       CUDA_R_16BF, k, x, CUDA_R_16BF, k, &beta, y, CUDA_R_32F, m,
                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace dscale::cuda
