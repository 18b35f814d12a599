// Compiled instead of cuda_backend.cc when the CUDA backend is not built.

#include "backend/cuda_backend.h"

namespace dscale {

Result<std::unique_ptr<StepBackend>> MakeCudaBackend(DecoderModel&, DFlashDrafter*) {
  return InvalidArgument(
      "--device cuda: this dscale was built without the CUDA backend (no nvcc was found when "
      "it was configured; see README, CUDA backend)");
}

}  // namespace dscale
