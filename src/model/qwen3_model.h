#pragma once
// The Qwen3 target on the CPU backend: a packed ragged batch in; logits for the rows asked for
// and the residual stream after selected layers (the DFlash drafter's features) out.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/qwen3_config.h"
#include "kv/paged_kv_cache.h"
#include "model/decoder_layer.h"
#include "model/packed_batch.h"
#include "model/qwen3_weights.h"

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

class Qwen3Model {
 public:
  // Loads `dir`/config.json and the safetensors checkpoint in `dir`.
  static Result<Qwen3Model> Load(const std::string& dir);
  Qwen3Model(Qwen3Config config, Qwen3Weights weights);

  const Qwen3Config& config() const { return config_; }
  const Qwen3Weights& weights() const { return weights_; }

  // KV cache geometry matching this model.
  KvCacheShape KvShape(int32_t page_size, int32_t num_pages) const;

  // Runs `batch`: writes every row's K/V into `cache` at its slot, then computes the outputs.
  // Bad tokens or capture layers are InvalidArgument; structural batch errors are bugs.
  // Not thread-safe: the model owns its scratch buffers.
  Status Forward(const PackedBatch& batch, const ForwardOptions& options, PagedKvCache& cache,
                 ForwardOutput* out);

 private:
  Status Validate(const PackedBatch& batch, const ForwardOptions& options,
                  const PagedKvCache& cache) const;
  void CaptureFeatures(int32_t slot, int32_t num_slots, int32_t rows, ForwardOutput* out) const;
  void ComputeLogits(const PackedBatch& batch, ForwardOutput* out);

  Qwen3Config config_;
  Qwen3Weights weights_;
  LayerDims dims_;
  // Scratch, grown on demand and reused across calls (no allocation in steady state).
  std::vector<float> x_;  // [rows, hidden] residual stream
  std::vector<cpu::AttentionSpan> spans_;
  LayerScratch scratch_;
};

}  // namespace dscale
