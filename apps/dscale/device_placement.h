#pragma once
// `--device cpu|cuda`: where the models run. cpu uses the loaded host models themselves. cuda
// uploads the target's and the drafter's weights to the GPU: the engine's forwards run through
// DeviceTarget and its drafting through the device drafter (model/cuda/device_target.h,
// device_drafter_host.h), while the DVL decision, acceptance and commit stay on the host. A
// build without the CUDA backend, or a machine without a usable device, gets an error saying
// which.

#include <memory>
#include <string>

#include "core/status.h"
#include "model/dflash_drafter.h"
#include "model/drafter.h"
#include "model/qwen3_model.h"
#include "model/target_model.h"

namespace CLI {
class App;
}

namespace dscale::cli {

inline constexpr const char* kDefaultDevice = "cpu";

// Adds --device to `cmd`, storing into `device` (cpu or cuda).
void AddDeviceOption(CLI::App* cmd, std::string* device);

// `--weights int8` runs on the CPU only: InvalidArgument saying so for `device` cuda (checked
// before any model loads).
Status CheckWeightsForDevice(const std::string& device, WeightsMode weights);

// The models an engine runs: the host ones, or their copies on the device.
class PlacedModels {
 public:
  // `host_drafter` may be null (the none policy). Both must outlive the result.
  static Result<PlacedModels> Place(const std::string& device, Qwen3Model& host_target,
                                    DFlashDrafter* host_drafter);
  PlacedModels(PlacedModels&&) noexcept;
  PlacedModels& operator=(PlacedModels&&) noexcept;
  ~PlacedModels();

  TargetModel& target();
  // The host drafter or its device copy; null without a drafter.
  Drafter* drafter();

 private:
  struct OnDevice;  // the CUDA objects (device_placement.cc)
  PlacedModels() = default;
  // The device copies of the models (an error naming the reason where there can be none).
  static Result<std::unique_ptr<OnDevice>> Upload(Qwen3Model& host_target,
                                                  DFlashDrafter* host_drafter);

  Qwen3Model* host_target_ = nullptr;
  DFlashDrafter* host_drafter_ = nullptr;
  std::unique_ptr<OnDevice> device_;  // set for --device cuda
};

}  // namespace dscale::cli
