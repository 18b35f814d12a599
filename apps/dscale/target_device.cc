#include "target_device.h"

#include <CLI/CLI.hpp>

#ifdef DSCALE_HAVE_CUDA
#include "model/cuda/device_target.h"
#endif

namespace dscale::cli {

void AddDeviceOption(CLI::App* cmd, std::string* device) {
  cmd->add_option("--device", *device,
                  "Where the target model runs: cpu, or cuda (its weights on the GPU; drafting "
                  "and the verification decision stay on the CPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
}

Result<PlacedTarget> PlacedTarget::Place(const std::string& device, Qwen3Model& host) {
  PlacedTarget placed;
  placed.host_ = &host;
  if (device == "cpu") return placed;
  if (device != "cuda") return InvalidArgument("--device: expected cpu or cuda, got " + device);
#ifdef DSCALE_HAVE_CUDA
  DSCALE_ASSIGN_OR_RETURN(placed.device_, cuda::DeviceTarget::Upload(host));
  return placed;
#else
  return InvalidArgument(
      "--device cuda: this dscale was built without the CUDA backend (no nvcc was found when "
      "it was configured; see README, CUDA backend)");
#endif
}

}  // namespace dscale::cli
