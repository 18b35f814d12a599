#pragma once
// The CUDA step backend's constructor. CMake compiles cuda_backend.cc where nvcc exists and
// cuda_backend_stub.cc (an error naming the missing backend) elsewhere; callers see only this.

#include <memory>

#include "backend/step_backend.h"
#include "core/status.h"
#include "model/decoder_model.h"
#include "model/dflash_drafter.h"

namespace dscale {

// Uploads the target and (when not null) the drafter; errors: no CUDA backend in this build, no
// usable device, weights that do not fit. The host models must outlive the result.
Result<std::unique_ptr<StepBackend>> MakeCudaBackend(DecoderModel& host_target,
                                                     DFlashDrafter* host_drafter);

}  // namespace dscale
