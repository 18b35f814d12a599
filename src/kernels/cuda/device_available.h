#pragma once
// Whether this process can use a CUDA device, and whether an allocation would fit it, asked
// without aborting: the CUDA queries whose failure is an expected condition (a build with the
// backend on a machine without a GPU or driver, a model too large for the GPU), so callers turn
// them into a clear error or a skipped test instead of a failed CUDA call.

#include <cstdint>
#include <string>

#include "core/status.h"

namespace dscale::cuda {

// Empty when a CUDA device can be used; otherwise why not (no driver, no device, ...).
// Computed once per process.
const std::string& CudaUnavailableReason();

// kResourceExhausted, naming `what` and the sizes, when `bytes` more would not fit in the current
// device's free memory: loading a model or sizing a KV cache too large for the GPU is bad input,
// not a failed CUDA call.
Status CheckDeviceMemoryFits(int64_t bytes, const std::string& what);

}  // namespace dscale::cuda
