#pragma once
// Checks for CUDA runtime and cuBLAS calls, and an owning device buffer.
//
// A failing CUDA or cuBLAS call is a programming error (a bad launch configuration, an invalid
// pointer) or a lost device, never bad input, so — like DSCALE_CHECK — it aborts, naming the
// call, where it was made and the error. Kernel launches report configuration errors through
// cudaGetLastError(); errors inside a kernel surface at the next synchronising call.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <utility>

#include "kernels/cuda/cublas_api.h"

namespace dscale::cuda::internal {

[[noreturn]] inline void CallFailed(const char* file, int line, const char* call, const char* name,
                                    const char* what) {
  std::fprintf(stderr, "dscale: CUDA call failed at %s:%d: %s — %s: %s\n", file, line, call, name,
               what);
  std::abort();
}

inline void CheckCuda(cudaError_t err, const char* file, int line, const char* call) {
  if (err != cudaSuccess) {
    CallFailed(file, line, call, cudaGetErrorName(err), cudaGetErrorString(err));
  }
}

inline void CheckCublas(cublasStatus_t status, const char* file, int line, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    CallFailed(file, line, call, "cuBLAS", Cublas().status_string(status));
  }
}

}  // namespace dscale::cuda::internal

#define DSCALE_CUDA_CHECK(call) \
  ::dscale::cuda::internal::CheckCuda((call), __FILE__, __LINE__, #call)
#define DSCALE_CUBLAS_CHECK(call) \
  ::dscale::cuda::internal::CheckCublas((call), __FILE__, __LINE__, #call)
// After a kernel launch: an invalid grid, block or shared-memory size is reported here.
#define DSCALE_CUDA_CHECK_LAUNCH() DSCALE_CUDA_CHECK(cudaGetLastError())

namespace dscale::cuda {

// An element count as the models keep them (int64) in the size_t that buffers and copies take.
inline size_t Count(int64_t n) { return static_cast<size_t>(n); }

// `count` values of T in device memory, freed on destruction. Move-only; copies to and from the
// host are synchronous (they wait for the device), which suits setup and tests, not hot paths.
template <typename T>
class DeviceBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "device buffers hold plain values");

 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (count > 0) DSCALE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), bytes()));
  }
  // A buffer holding a copy of host[0, count).
  DeviceBuffer(const T* host, size_t count) : DeviceBuffer(count) { CopyFromHost(host); }
  ~DeviceBuffer() { Release(); }

  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      Release();
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

  // Overwrites the whole buffer with host[0, size()).
  void CopyFromHost(const T* host) {
    if (count_ > 0) DSCALE_CUDA_CHECK(cudaMemcpy(data_, host, bytes(), cudaMemcpyHostToDevice));
  }
  // Copies the whole buffer to host[0, size()).
  void CopyToHost(T* host) const {
    if (count_ > 0) DSCALE_CUDA_CHECK(cudaMemcpy(host, data_, bytes(), cudaMemcpyDeviceToHost));
  }

 private:
  void Release() {
    // Freeing can only fail once the device is already lost; there is nothing left to do then.
    if (data_ != nullptr) static_cast<void>(cudaFree(data_));
    data_ = nullptr;
    count_ = 0;
  }

  T* data_ = nullptr;
  size_t count_ = 0;
};

}  // namespace dscale::cuda
