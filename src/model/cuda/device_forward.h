#pragma once
// The Qwen3 target on the device: a packed ragged batch in, logits for every row and the
// residual stream after selected layers out — the contract of Qwen3Model::Forward
// (model/qwen3_model.h) on device pointers, with BF16 weights resident on the device:
//
//   embedding → per layer: RMSNorm → QKV GEMM → q/k head RMSNorm → RoPE → K/V stored at the
//   rows' slots → paged attention → O GEMM added to the residual → RMSNorm → gate_up GEMM →
//   SwiGLU → down GEMM added to the residual → final RMSNorm → LM head
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
#include "kernels/cuda/attention.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm_bf16.h"
#include "model/cuda/device_kv_cache.h"
#include "model/cuda/device_weights.h"
#include "model/decoder_layer.h"

namespace dscale::cuda {

// A packed ragged batch in device memory (the PackedBatch contract, model/packed_batch.h).
struct DeviceBatchView {
  int32_t rows = 0;                    // rows computed; every row array has at least this many
  const int32_t* tokens = nullptr;     // [rows], each in [0, vocab)
  const int32_t* positions = nullptr;  // [rows]
  const int32_t* kv_slots = nullptr;   // [rows]
  // Device scalar or null. When set, rows at or past *live_rows are padding: they are computed
  // (their outputs are unspecified) but their K/V are not stored (kv_write.h). Null: all live.
  const int32_t* live_rows = nullptr;
  const AttentionSpan* spans = nullptr;  // [num_spans] (device), page tables on the device
  int32_t num_spans = 0;
  int32_t max_q_len = 0;  // ≥ every span's q_len: the attention grid's tile count
  int tile_rows = 128;    // attention query-row tile height, one of kAttentionTileHeights
};

struct DeviceForwardOutputs {
  float* logits = nullptr;    // [rows, vocab]
  float* features = nullptr;  // [rows, capture_layers.size() · hidden]; may be null without
                              // capture layers
};

// Intermediates of one forward of up to max_rows rows, allocated once.
class DeviceForwardScratch {
 public:
  DeviceForwardScratch(const LayerDims& dims, int64_t max_rows);

  int64_t max_rows() const { return max_rows_; }
  int64_t bytes() const;

  DeviceBuffer<float> x;        // [rows, hidden] residual stream
  DeviceBuffer<float> normed;   // [rows, hidden]
  DeviceBuffer<Bf16> gemm_in;   // [rows, max(hidden, q_dim, intermediate)] GEMM input
  DeviceBuffer<float> qkv;      // [rows, q_dim + 2·kv_dim]
  DeviceBuffer<float> attn;     // [rows, q_dim]
  DeviceBuffer<float> gate_up;  // [rows, 2·intermediate]
  DeviceBuffer<float> act;      // [rows, intermediate]

 private:
  int64_t max_rows_;
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
  // slot, then writes out.logits for every row and, for each layer in capture_layers (0-based,
  // in list order), the residual stream after it into out.features. batch.rows ≤
  // scratch.max_rows(). Bad layers or sizes are CHECK failures (the host validated the batch).
  // Not thread-safe (one cuBLAS handle).
  void Forward(const DeviceBatchView& batch, std::span<const int32_t> capture_layers,
               DeviceKvCache& kv, DeviceForwardScratch& scratch, const DeviceForwardOutputs& out,
               cudaStream_t stream);

 private:
  void RunLayer(int32_t layer, const DeviceBatchView& batch, DeviceKvCache& kv,
                DeviceForwardScratch& s, cudaStream_t stream);
  void AttentionHalf(int32_t layer, const DeviceBatchView& batch, DeviceKvCache& kv,
                     DeviceForwardScratch& s, cudaStream_t stream);
  void MlpHalf(int32_t layer, int32_t rows, DeviceForwardScratch& s, cudaStream_t stream);
  // out[rows, out_dim] (+)= bf16(in[rows, in_dim]) · w[out_dim, in_dim]ᵀ.
  void Project(const float* in, int64_t in_dim, const Bf16* w, float* out, int64_t out_dim,
               int32_t rows, bool accumulate, DeviceForwardScratch& s, cudaStream_t stream);
  void CaptureResidual(int32_t rows, int32_t slot, int32_t num_slots, const float* x,
                       float* features, cudaStream_t stream) const;

  Qwen3Config config_;
  LayerDims dims_;
  DeviceQwen3Weights weights_;
  GemmContext gemm_;
};

}  // namespace dscale::cuda
