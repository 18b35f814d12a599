#include "device_placement.h"

#include <CLI/CLI.hpp>

#ifdef DSCALE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <optional>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_available.h"
#include "model/cuda/device_drafter.h"
#include "model/cuda/device_drafter_host.h"
#include "model/cuda/device_target.h"
#endif

namespace dscale::cli {

void AddDeviceOption(CLI::App* cmd, std::string* device) {
  cmd->add_option("--device", *device,
                  "Where the target and drafter run: cpu, or cuda (weights on the GPU; the "
                  "verification decision and acceptance stay on the CPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
}

Status CheckWeightsForDevice(const std::string& device, WeightsMode weights) {
  if (device == "cpu" || weights == WeightsMode::kAsStored) return Status::Ok();
  return InvalidArgument("--weights " + std::string(WeightsModeName(weights)) +
                         ": the int8 kernels run on the CPU only; use --device cpu, or "
                         "--weights as-stored with --device " +
                         device);
}

#ifdef DSCALE_HAVE_CUDA

namespace {

// Requests per draft call and context rows per append that the device drafter's adapter runs at
// once; larger calls are split (device_drafter_host.h).
constexpr int32_t kDraftRequestsPerCall = 32;
constexpr int32_t kContextRowsPerCall = 512;

// Bytes the drafter's weights take on the device: matrices BF16, norm gains f32 (the gains are
// counted as BF16 too; they are a rounding error of the total).
int64_t DeviceDrafterBytes(const DFlashWeights& w) {
  size_t values = w.fc.size() + w.hidden_norm.size() + w.final_norm.size();
  for (const Qwen3LayerWeights& l : w.layers) {
    values += l.input_norm.size() + l.qkv.size() + l.q_norm.size() + l.k_norm.size() +
              l.o_proj.size() + l.post_norm.size() + l.gate_up.size() + l.down.size();
  }
  return static_cast<int64_t>(values) * 2;
}

}  // namespace

struct PlacedModels::OnDevice {
  std::unique_ptr<cuda::DeviceTarget> target;
  cudaStream_t stream = nullptr;  // the drafter's
  std::optional<cuda::DeviceDFlashDrafter> drafter;
  std::optional<cuda::DeviceDrafterHost> drafter_host;

  ~OnDevice() {
    drafter_host.reset();  // uses the drafter and the stream
    drafter.reset();
    if (stream != nullptr) static_cast<void>(cudaStreamDestroy(stream));
  }
};

Result<std::unique_ptr<PlacedModels::OnDevice>> PlacedModels::Upload(Qwen3Model& host_target,
                                                                     DFlashDrafter* host_drafter) {
  auto on = std::make_unique<OnDevice>();
  DSCALE_ASSIGN_OR_RETURN(on->target, cuda::DeviceTarget::Upload(host_target));
  if (host_drafter != nullptr) {
    DSCALE_RETURN_IF_ERROR(cuda::CheckDeviceMemoryFits(DeviceDrafterBytes(host_drafter->weights()),
                                                       "the drafter's BF16 weights"));
    DSCALE_CUDA_CHECK(cudaStreamCreateWithFlags(&on->stream, cudaStreamNonBlocking));
    // The draft KV cache is sized when an engine binds its cache; one page until then.
    const KvCacheShape placeholder = on->target->KvShape(/*page_size=*/16, /*num_pages=*/1);
    on->drafter.emplace(host_drafter->config(),
                        cuda::UploadDFlashWeights(host_drafter->config(), host_drafter->weights()),
                        on->target->model(), placeholder);
    on->drafter_host.emplace(*on->drafter, kDraftRequestsPerCall, kContextRowsPerCall, on->stream);
  }
  return on;
}

#else

struct PlacedModels::OnDevice {};

Result<std::unique_ptr<PlacedModels::OnDevice>> PlacedModels::Upload(Qwen3Model&, DFlashDrafter*) {
  return InvalidArgument(
      "--device cuda: this dscale was built without the CUDA backend (no nvcc was found when "
      "it was configured; see README, CUDA backend)");
}

#endif

Result<PlacedModels> PlacedModels::Place(const std::string& device, Qwen3Model& host_target,
                                         DFlashDrafter* host_drafter) {
  PlacedModels placed;
  placed.host_target_ = &host_target;
  placed.host_drafter_ = host_drafter;
  if (device == "cpu") return placed;
  if (device != "cuda") return InvalidArgument("--device: expected cpu or cuda, got " + device);
  if (host_drafter != nullptr && host_drafter->head() != nullptr) {
    return InvalidArgument("--drafter-head domino runs on the CPU only (--device cpu)");
  }
  DSCALE_ASSIGN_OR_RETURN(placed.device_, Upload(host_target, host_drafter));
  return placed;
}

PlacedModels::PlacedModels(PlacedModels&&) noexcept = default;
PlacedModels& PlacedModels::operator=(PlacedModels&&) noexcept = default;
PlacedModels::~PlacedModels() = default;

TargetModel& PlacedModels::target() {
#ifdef DSCALE_HAVE_CUDA
  if (device_) return *device_->target;
#endif
  return *host_target_;
}

Drafter* PlacedModels::drafter() {
#ifdef DSCALE_HAVE_CUDA
  if (device_ && device_->drafter_host) return &*device_->drafter_host;
#endif
  return host_drafter_;
}

}  // namespace dscale::cli
