#pragma once
// `--device cpu|cuda`: where the target's forwards run. cpu uses the loaded host model itself;
// cuda uploads its weights to the GPU (model/cuda/device_target.h) and the engine's forwards run
// there, while drafting, the DVL decision and acceptance stay on the host. A build without the
// CUDA backend, or a machine without a usable device, gets an error saying which.

#include <memory>
#include <string>

#include "core/status.h"
#include "model/qwen3_model.h"
#include "model/target_model.h"

namespace CLI {
class App;
}

namespace dscale::cli {

inline constexpr const char* kDefaultDevice = "cpu";

// Adds --device to `cmd`, storing into `device` (cpu or cuda).
void AddDeviceOption(CLI::App* cmd, std::string* device);

// The target the engine runs: the host model, or its copy on the device.
class PlacedTarget {
 public:
  static Result<PlacedTarget> Place(const std::string& device, Qwen3Model& host);

  TargetModel& target() { return device_ ? *device_ : *host_; }

 private:
  Qwen3Model* host_ = nullptr;
  std::unique_ptr<TargetModel> device_;  // set for --device cuda
};

}  // namespace dscale::cli
