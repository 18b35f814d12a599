#include "kernels/cuda/device_available.h"

#include <cuda_runtime_api.h>

namespace dscale::cuda {

const std::string& CudaUnavailableReason() {
  static const std::string reason = [] {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      static_cast<void>(cudaGetLastError());  // clear the sticky error for later queries
      return std::string("cudaGetDeviceCount failed with ") + cudaGetErrorName(err) + " (" +
             cudaGetErrorString(err) + ")";
    }
    return count == 0 ? std::string("cudaGetDeviceCount found no device") : std::string();
  }();
  return reason;
}

}  // namespace dscale::cuda
