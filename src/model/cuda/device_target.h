#pragma once
// The Qwen3 target on the CUDA backend behind the engine's TargetModel seam
// (model/target_model.h): `dscale generate|serve|bench --device cuda` runs the target's forwards
// here while the rest of the step (drafting, the DVL decision, acceptance, commit) stays on the
// host.
//
// Weights are BF16 on the device (DeviceDecoderWeights) and the K/V rows live in a DeviceKvCache;
// the host PagedKvCache the engine makes from KvShape has zero layers and supplies pages and page
// tables only. Each Forward copies the batch to the device, queues DeviceDecoderModel::Forward with
// the LM head on the rows asked for only, and copies back their logits and the captured
// features; it returns once they are on the host. Numerics are the device forward's (BF16 GEMM
// inputs, f32 accumulation), so logits differ from the CPU model's by BF16 rounding, not by an
// algorithmic difference.
//
// The device rows belong to one host cache at a time: a forward on another cache re-allocates
// them for it, and the previous cache may not be used again with this target (a CHECK failure:
// its rows are gone).

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_set>
#include <vector>

#include "core/status.h"
#include "kernels/cuda/cuda_check.h"
#include "model/cuda/device_forward.h"
#include "model/cuda/device_kv_cache.h"
#include "model/cuda/device_weights.h"
#include "model/decoder_model.h"
#include "model/target_model.h"

namespace dscale::cuda {

class DeviceTarget final : public TargetModel {
 public:
  // Uploads `host`'s weights to the current device (an error naming the reason when no device
  // can be used, or when the weights do not fit in its free memory).
  static Result<std::unique_ptr<DeviceTarget>> Upload(const DecoderModel& host);
  DeviceTarget(DecoderConfig config, DeviceDecoderWeights weights);
  ~DeviceTarget() override;
  DeviceTarget(const DeviceTarget&) = delete;
  DeviceTarget& operator=(const DeviceTarget&) = delete;

  const DecoderConfig& config() const override { return model_.config(); }
  // The host cache's geometry: num_layers = 0 (rows live on the device).
  KvCacheShape KvShape(int32_t page_size, int32_t num_pages) const override;
  Status Forward(const StepBatch& batch, PagedKvCache& cache, ForwardOutput* out) override;

  DeviceDecoderModel& model() { return model_; }
  // The device K/V rows of the cache last forwarded on (null before the first forward); a
  // device verification step writes its rows' K/V there as Forward would.
  const DeviceKvCache* kv() const { return kv_ ? &*kv_ : nullptr; }
  DeviceKvCache* kv() { return kv_ ? &*kv_ : nullptr; }

 private:
  // Makes the device rows belong to `cache`, allocating them on first use of that cache
  // (kResourceExhausted when they do not fit the device's free memory).
  Status Bind(const PagedKvCache& cache);
  // Grows the scratch and output buffers to hold `rows` rows of logits and of
  // `feature_width` captured floats.
  void Reserve(int32_t rows, int64_t feature_width);

  DeviceDecoderModel model_;
  cudaStream_t stream_ = nullptr;
  std::optional<DeviceKvCache> kv_;
  uint64_t bound_cache_ = 0;                     // id of the cache kv_ belongs to
  std::unordered_set<uint64_t> dropped_caches_;  // caches whose rows were given up
  std::unique_ptr<DeviceForwardScratch> scratch_;
  DeviceBuffer<float> logits_;        // [capacity, vocab]
  DeviceBuffer<int32_t> logit_rows_;  // [capacity] the rows the LM head runs on
  DeviceBuffer<float> features_;      // [capacity, captured layers · hidden]
};

}  // namespace dscale::cuda
