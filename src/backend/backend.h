#pragma once
// Choosing a step backend at run time, by name (`--device`):
//   cpu   the loaded host models and the host stages (CpuBackend)
//   cuda  the target's and the drafter's weights uploaded to the GPU as BF16, their K/V in device
//         memory, and the stages on the device where they exist (cuda_backend.h)
// A build without the CUDA backend, or a machine without a usable device, gets an error saying
// which; so does a model that does not fit the device's free memory.

#include <array>
#include <memory>
#include <string_view>

#include "backend/step_backend.h"
#include "core/status.h"
#include "model/decoder_model.h"
#include "model/dflash_drafter.h"
#include "spec/draft_distribution.h"

namespace dscale {

inline constexpr std::array<std::string_view, 2> kDeviceNames = {"cpu", "cuda"};
inline constexpr std::string_view kDefaultDevice = "cpu";

// `--weights int8` and `--weights int4` (and `--drafter-weights`, `flag`) run on the CPU only:
// InvalidArgument saying so for another device (checked before any model loads).
Status CheckWeightsForDevice(std::string_view device, WeightsMode weights,
                             std::string_view flag = "--weights");

// `--draft-sampling distribution` drafts on the CPU backend only (the CUDA backend's drafter
// proposes argmax drafts): InvalidArgument naming both flags for another device (checked before
// any model loads; Engine::Create checks the drafter itself).
Status CheckDraftSamplingForDevice(std::string_view device, DraftSampling sampling);

// The backend named `device`. `host_drafter` may be null (the none policy); a drafter with a
// Domino head runs on the CPU only. The host models must outlive the result.
Result<std::unique_ptr<StepBackend>> MakeBackend(std::string_view device, DecoderModel& host_target,
                                                 DFlashDrafter* host_drafter);

}  // namespace dscale
