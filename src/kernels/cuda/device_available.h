#pragma once
// Whether this process can use a CUDA device, asked without aborting: the one CUDA query that is
// an expected failure (a build with the backend run on a machine without a GPU or driver), so
// callers turn it into a clear error or a skipped test instead of a failed CUDA call.

#include <string>

namespace dscale::cuda {

// Empty when a CUDA device can be used; otherwise why not (no driver, no device, ...).
// Computed once per process.
const std::string& CudaUnavailableReason();

}  // namespace dscale::cuda
