#include "backend/backend.h"

#include <string>

#include "backend/cpu_backend.h"
#include "backend/cuda_backend.h"

namespace dscale {

Status CheckWeightsForDevice(std::string_view device, WeightsMode weights, std::string_view flag) {
  if (device == "cpu" || !IsQuantized(weights)) return Status::Ok();
  return InvalidArgument(std::string(flag) + " " + std::string(WeightsModeName(weights)) +
                         ": quantised weights run on the CPU only; use --device cpu, or " +
                         std::string(flag) + " as-stored with --device " + std::string(device));
}

Status CheckDraftSamplingForDevice(std::string_view device, DraftSampling sampling) {
  if (device == "cpu" || sampling == DraftSampling::kArgmax) return Status::Ok();
  return InvalidArgument("--draft-sampling distribution: --device " + std::string(device) +
                         " drafts by argmax only; use --device cpu, or --draft-sampling argmax");
}

Result<std::unique_ptr<StepBackend>> MakeBackend(std::string_view device, DecoderModel& host_target,
                                                 DFlashDrafter* host_drafter) {
  if (device == "cpu") {
    return std::unique_ptr<StepBackend>(std::make_unique<CpuBackend>(host_target, host_drafter));
  }
  if (device != "cuda") {
    return InvalidArgument("--device: expected cpu or cuda, got " + std::string(device));
  }
  if (host_drafter != nullptr && host_drafter->head() != nullptr) {
    return InvalidArgument("--drafter-head domino runs on the CPU only (--device cpu)");
  }
  if (host_drafter != nullptr && host_drafter->draft_vocab() != nullptr) {
    return InvalidArgument(
        "--draft-vocab: a reduced draft vocabulary runs on the CPU only (--device cpu); pass "
        "--draft-vocab full with --device cuda");
  }
  return MakeCudaBackend(host_target, host_drafter);
}

}  // namespace dscale
