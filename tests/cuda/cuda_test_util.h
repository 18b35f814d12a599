#pragma once
// Shared pieces of the CUDA parity tests: a fixture that skips every test when no CUDA device
// can be used, and copies between host vectors and device buffers.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_available.h"

namespace dscale::testing {

// Base fixture: skips the test without a device, else gives it a stream of its own.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string& reason = cuda::CudaUnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << "no CUDA device: " << reason;
    DSCALE_CUDA_CHECK(cudaStreamCreate(&stream_));
  }
  void TearDown() override {
    if (stream_ != nullptr) DSCALE_CUDA_CHECK(cudaStreamDestroy(stream_));
  }

  template <typename T>
  static cuda::DeviceBuffer<T> ToDevice(const std::vector<T>& host) {
    return cuda::DeviceBuffer<T>(host.data(), host.size());
  }

  // Waits for the work queued on the stream, then copies the whole buffer back.
  template <typename T>
  std::vector<T> ToHost(const cuda::DeviceBuffer<T>& device) {
    DSCALE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::vector<T> host(device.size());
    device.CopyToHost(host.data());
    return host;
  }

  cudaStream_t stream_ = nullptr;
};

}  // namespace dscale::testing
