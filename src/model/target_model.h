#pragma once
// The seam where the engine meets a target model: a packed ragged batch in; logits for the rows
// asked for and the residual streams after selected layers (the DFlash drafter's features) out.
// The CPU backend's Qwen3Model (model/qwen3_model.h) implements it, and so does the CUDA
// backend's DeviceTarget (model/cuda/device_target.h), which keeps weights and K/V on the device.

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "io/qwen3_config.h"
#include "kv/paged_kv_cache.h"
#include "model/packed_batch.h"

namespace dscale {

struct ForwardOptions {
  // Attention query-row tile height: 16 for verification and drafting (every request has at
  // most 16 rows), 128 for prefill. One of cpu::kAttentionTileHeights.
  int tile_rows = 128;
  // 0-based decoder layers whose output residual stream is captured, in this order.
  std::vector<int32_t> capture_layers;
};

struct ForwardOutput {
  std::vector<float> logits;    // [logit_rows, vocab]
  std::vector<float> features;  // [rows, capture_layers.size() · hidden], list order
};

class TargetModel {
 public:
  virtual ~TargetModel() = default;

  virtual const Qwen3Config& config() const = 0;

  // Geometry of the host PagedKvCache a caller makes for this model. A target that keeps its
  // K/V rows elsewhere (on the device) asks for num_layers = 0: the host cache then holds pages
  // and page tables only.
  virtual KvCacheShape KvShape(int32_t page_size, int32_t num_pages) const = 0;

  // Runs `batch`: writes every row's K/V at its slot (pages and page tables from `cache`), then
  // computes the outputs. Bad tokens or capture layers are InvalidArgument (ValidateForward);
  // structural batch errors are bugs. Not thread-safe: a model owns its scratch buffers.
  virtual Status Forward(const PackedBatch& batch, const ForwardOptions& options,
                         PagedKvCache& cache, ForwardOutput* out) = 0;
};

// The checks every TargetModel::Forward makes before running: rows and requests consistent and
// reserved in `cache` (CHECKed: the engine built them), tokens inside the vocabulary and capture
// layers inside the model (InvalidArgument naming the value).
Status ValidateForward(const Qwen3Config& config, const PackedBatch& batch,
                       const ForwardOptions& options, const PagedKvCache& cache);

}  // namespace dscale
