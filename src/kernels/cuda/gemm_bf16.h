#pragma once
// Dense matrix products with BF16 weights and f32 accumulation through cuBLAS (cublasGemmEx,
// CUBLAS_COMPUTE_32F), for the device target forward.
//
// Activations enter as BF16 too: cublasGemmEx has no BF16 × f32 combination, so the caller
// rounds each GEMM input row to BF16 (ConvertToBf16, bf16.h) — what BF16 serving stacks do.
// Products of two BF16 values are exact in f32 and every sum is accumulated in f32, so against
// the CPU's f32 Linear on the same BF16-rounded inputs the only difference is the order of the
// f32 additions; against f32 activations the rounding adds at most 2⁻⁸·Σ|x_i·w_i| per output
// (tests/cuda/gemm_bf16_test.cc states both bounds). Outputs are f32: the residual stream,
// norms, attention and logits stay in f32 as on the CPU.
//
// GemmContext owns the cuBLAS handle and a fixed workspace. cublasSetStream resets a handle's
// workspace to cuBLAS's own pool, which may allocate while a graph is being captured, so every
// product rebinds the fixed workspace after binding the stream: a captured graph then reads and
// writes only memory allocated before the capture.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/bf16.h"
#include "kernels/cuda/cuda_check.h"

namespace dscale::cuda {

class GemmContext {
 public:
  // cuBLAS's recommended workspace for Hopper (it asks for 4 MiB on earlier GPUs).
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

  // Creates the handle (default math mode) and allocates the workspace on the current device.
  GemmContext();
  ~GemmContext();
  GemmContext(GemmContext&& other) noexcept;
  GemmContext& operator=(GemmContext&& other) noexcept;
  GemmContext(const GemmContext&) = delete;
  GemmContext& operator=(const GemmContext&) = delete;

  // Binds the handle to `stream`, host pointer mode and the fixed workspace.
  cublasHandle_t BindTo(cudaStream_t stream) const;
  size_t workspace_bytes() const { return workspace_.bytes(); }

 private:
  cublasHandle_t handle_ = nullptr;
  DeviceBuffer<std::byte> workspace_;
};

// y[rows, out] = x[rows, in] · w[out, in]ᵀ, or y += that when `accumulate`. x and w are BF16,
// y is f32; PyTorch's Linear layout ([out, in] row-major) for w, all row-major and dense, device
// pointers. Queued on `stream`; no allocation, no synchronisation (graph-capturable). A handle
// is not thread-safe: one GemmContext per thread.
void LinearBf16(const GemmContext& gemm, const Bf16* x, const Bf16* w, float* y, int64_t rows,
                int64_t in, int64_t out, bool accumulate, cudaStream_t stream);

}  // namespace dscale::cuda
