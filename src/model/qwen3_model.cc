#include "model/qwen3_model.h"

#include <cstring>
#include <memory>
#include <string>

#include "io/safetensors.h"
#include "kernels/cpu/norm.h"

namespace dscale {

Result<Qwen3Model> Qwen3Model::Load(const std::string& dir, WeightsMode weights_mode) {
  DSCALE_ASSIGN_OR_RETURN(Qwen3Config config, LoadQwen3Config(dir + "/config.json"));
  DSCALE_ASSIGN_OR_RETURN(Checkpoint opened, Checkpoint::Open(dir));
  const auto checkpoint = std::make_shared<const Checkpoint>(std::move(opened));
  const WeightsLoad how{
      .mode = weights_mode,
      .drop_resident = [&checkpoint](const std::string& name) { checkpoint->DropResident(name); }};
  DSCALE_ASSIGN_OR_RETURN(Qwen3Weights weights,
                          LoadQwen3Weights(config, CheckpointTensorReader(checkpoint), how));
  return Qwen3Model(std::move(config), std::move(weights));
}

Qwen3Model::Qwen3Model(Qwen3Config config, Qwen3Weights weights)
    : config_(std::move(config)), weights_(std::move(weights)), dims_(LayerDims::From(config_)) {
  DSCALE_CHECK(static_cast<int64_t>(weights_.layers.size()) == config_.num_hidden_layers);
}

KvCacheShape Qwen3Model::KvShape(int32_t page_size, int32_t num_pages) const {
  return {.num_layers = static_cast<int32_t>(config_.num_hidden_layers),
          .kv_heads = static_cast<int32_t>(config_.num_key_value_heads),
          .head_dim = static_cast<int32_t>(config_.head_dim),
          .page_size = page_size,
          .num_pages = num_pages};
}

Status Qwen3Model::Forward(const StepBatch& batch, PagedKvCache& cache, ForwardOutput* out) {
  CheckForward(config_, batch, cache);
  const int32_t rows = batch.rows();
  const int64_t hidden = config_.hidden_size;
  const std::vector<int32_t>& capture = batch.capture_layers;
  const auto num_capture = static_cast<int32_t>(capture.size());
  out->features.assign(static_cast<size_t>(rows) * num_capture * hidden, 0.0f);

  float* x = GrowBuffer(x_, rows * hidden);
  GatherRows(weights_.embed, batch.tokens().data(), rows, x);
  for (int32_t layer = 0; layer < config_.num_hidden_layers; ++layer) {
    RunDecoderLayer(weights_.layers[layer], dims_, batch, layer, cache.store(), scratch_, x);
    for (int32_t slot = 0; slot < num_capture; ++slot) {
      if (capture[slot] == layer) CaptureFeatures(slot, num_capture, rows, out);
    }
  }
  ComputeLogits(batch, out);
  return Status::Ok();
}

void Qwen3Model::CaptureFeatures(int32_t slot, int32_t num_slots, int32_t rows,
                                 ForwardOutput* out) const {
  const int64_t hidden = config_.hidden_size;
  for (int32_t r = 0; r < rows; ++r) {
    std::memcpy(out->features.data() + (static_cast<int64_t>(r) * num_slots + slot) * hidden,
                x_.data() + r * hidden, hidden * sizeof(float));
  }
}

void Qwen3Model::ComputeLogits(const StepBatch& batch, ForwardOutput* out) {
  const int64_t hidden = config_.hidden_size;
  const std::span<const int32_t> logit_rows = batch.logit_rows();
  const auto n = static_cast<int64_t>(logit_rows.size());
  float* selected = GrowBuffer(scratch_.normed, n * hidden);
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(selected + i * hidden, x_.data() + logit_rows[i] * hidden, hidden * sizeof(float));
  }
  cpu::RmsNorm(selected, weights_.final_norm.data(), selected, n, hidden,
               static_cast<float>(config_.rms_norm_eps));
  out->logits.resize(n * config_.vocab_size);
  Project(selected, weights_.LmHead(), out->logits.data(), n);
}

}  // namespace dscale
