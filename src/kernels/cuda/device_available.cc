#include "kernels/cuda/device_available.h"

#include <cuda_runtime_api.h>

#include <cstdio>

#include "kernels/cuda/cublas_api.h"
#include "kernels/cuda/cuda_check.h"

namespace dscale::cuda {
namespace {

std::string GiB(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

}  // namespace

const std::string& CudaUnavailableReason() {
  static const std::string reason = [] {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      static_cast<void>(cudaGetLastError());  // clear the sticky error for later queries
      return std::string("cudaGetDeviceCount failed with ") + cudaGetErrorName(err) + " (" +
             cudaGetErrorString(err) + ")";
    }
    if (count == 0) return std::string("cudaGetDeviceCount found no device");
    return CublasUnavailableReason();
  }();
  return reason;
}

Status CheckDeviceMemoryFits(int64_t bytes, const std::string& what) {
  size_t free_bytes = 0, total_bytes = 0;
  DSCALE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (static_cast<double>(bytes) <= static_cast<double>(free_bytes)) return Status::Ok();
  return ResourceExhausted(what + " needs " + GiB(static_cast<double>(bytes)) +
                           " of device memory; " + GiB(static_cast<double>(free_bytes)) + " of " +
                           GiB(static_cast<double>(total_bytes)) + " are free");
}

}  // namespace dscale::cuda
