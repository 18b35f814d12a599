#pragma once
// The Qwen3 target on the device: a packed ragged batch in, logits for every row and the
// residual stream after selected layers out — the contract of Qwen3Model::Forward
// (model/qwen3_model.h) on device pointers, with BF16 weights resident on the device:
//
//   embedding → per layer: RMSNorm → QKV GEMM → q/k head RMSNorm → RoPE → K/V stored at the
//   rows' slots → paged attention → O GEMM added to the residual → RMSNorm → gate_up GEMM →
//   SwiGLU → down GEMM added to the residual → final RMSNorm → LM head
//
// The layer is RunDeviceDecoderLayer (device_layer.h), which the device drafter shares.
//
// Numerics: every GEMM takes BF16 weights and BF16-rounded activations and accumulates in f32
// (kernels/cuda/gemm_bf16.h); everything else — residual stream, norms, RoPE, attention, K/V,
// logits — is f32 with the CPU kernels' contracts.
//
// Forward only queues work: no allocation, no synchronisation, every address fixed by the
// caller's buffers and every per-step value (tokens, spans, the live row count) read from
// device memory — so a caller can capture it into a CUDA graph (kernels/cuda/graph.h) and
// replay it with new inputs copied into the same buffers.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "io/qwen3_config.h"
#include "kernels/cuda/gemm_bf16.h"
#include "model/cuda/device_kv_cache.h"
#include "model/cuda/device_layer.h"
#include "model/cuda/device_weights.h"
#include "model/decoder_layer.h"

namespace dscale::cuda {

struct DeviceForwardOutputs {
  float* logits = nullptr;    // [rows, vocab], or [num_logit_rows, vocab] with logit_rows
  float* features = nullptr;  // [rows, capture_layers.size() · hidden]; may be null without
                              // capture layers
  // Device array or null. When set, logits are computed only for these rows, in this order
  // (StepBatch::logit_rows(): prefill wants one row per request, not a vocabulary-wide row for
  // every prompt token); each must lie in [0, rows). Null: every row.
  const int32_t* logit_rows = nullptr;
  int32_t num_logit_rows = 0;
};

class DeviceQwen3Model {
 public:
  // Creates the model's cuBLAS context on the current device.
  DeviceQwen3Model(Qwen3Config config, DeviceQwen3Weights weights);

  const Qwen3Config& config() const { return config_; }
  const LayerDims& dims() const { return dims_; }
  const DeviceQwen3Weights& weights() const { return weights_; }

  // KV cache geometry matching this model.
  KvCacheShape KvShape(int32_t page_size, int32_t num_pages) const;

  // Queues the forward of `batch` on `stream`: stores every live row's K/V into `kv` at its
  // slot, then writes out.logits for every row (or those out.logit_rows names) and, for each layer
  // in capture_layers (0-based, in list order), the residual stream after it into out.features.
  // batch.rows ≤ scratch.max_rows(); batch.causal (the target attends causally). Bad layers or
  // sizes are CHECK failures (the host validated the batch). Not thread-safe (one cuBLAS handle).
  void Forward(const DeviceBatchView& batch, std::span<const int32_t> capture_layers,
               DeviceKvCache& kv, DeviceForwardScratch& scratch, const DeviceForwardOutputs& out,
               cudaStream_t stream);

 private:
  Qwen3Config config_;
  LayerDims dims_;
  DeviceQwen3Weights weights_;
  GemmContext gemm_;
};

}  // namespace dscale::cuda
