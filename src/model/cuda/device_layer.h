#pragma once
// One Qwen3 pre-norm decoder layer on the device over a packed ragged batch, shared by the
// target (causal attention, device_forward.h) and the DFlash drafter (non-causal attention over
// its context plus its block, device_drafter.h) — the device counterpart of RunDecoderLayer
// (model/decoder_layer.h):
//
//   x += o_proj(attention(rope(q_norm(q)), rope(k_norm(k)), v))   with q, k, v from RMSNorm(x)
//   x += down(silu(gate(RMSNorm(x))) · up(RMSNorm(x)))
//
// Numerics: every GEMM takes BF16 weights and BF16-rounded activations and accumulates in f32
// (kernels/cuda/gemm_bf16.h); the residual stream, norms, RoPE, attention and K/V are f32.
// Everything here only queues work on the caller's buffers (graph-capturable).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm_bf16.h"
#include "model/cuda/device_kv_cache.h"
#include "model/cuda/device_weights.h"
#include "model/decoder_layer.h"

namespace dscale::cuda {

// A StepBatch's rows and spans in device memory (the contract of core/step_batch.h).
struct DeviceBatchView {
  int32_t rows = 0;                    // rows computed; every row array has at least this many
  const int32_t* tokens = nullptr;     // [rows], each in [0, vocab)
  const int32_t* positions = nullptr;  // [rows]
  const int32_t* kv_slots = nullptr;   // [rows]
  // Device scalar or null. When set, rows at or past *live_rows are padding: they are computed
  // (their outputs are unspecified) but their K/V are not stored (kv_write.h). Null: all live.
  const int32_t* live_rows = nullptr;
  const StepSpan* spans = nullptr;  // [num_spans] (device), page tables on the device
  int32_t num_spans = 0;
  int32_t max_q_len = 0;  // ≥ every span's q_len: the attention grid's tile count
  int tile_rows = 128;    // attention query-row tile height, one of kAttentionTileHeights
  // Causal: row j of a span sees its context and rows 0 .. j (the target). Non-causal: every
  // row sees the context and the whole span (the drafter's block).
  bool causal = true;
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

// out[rows, out_dim] (+)= bf16(in[rows, in_dim]) · w[out_dim, in_dim]ᵀ: `in` is rounded into
// gemm_in (at least rows · in_dim values, CHECKed) and multiplied there.
void ProjectBf16(const GemmContext& gemm, const float* in, int64_t in_dim, const Bf16* w,
                 float* out, int64_t out_dim, int32_t rows, bool accumulate,
                 DeviceBuffer<Bf16>& gemm_in, cudaStream_t stream);

// Zeroes scratch.attn's first `rows` rows. Attention writes only the rows its spans cover, so
// call it once before a batch's layers: padding rows then keep zeros, and every value
// downstream stays finite and the same from run to run.
void ClearAttentionRows(const LayerDims& dims, int32_t rows, DeviceForwardScratch& scratch,
                        cudaStream_t stream);

// Runs the layer in place on the residual stream scratch.x [batch.rows, hidden], storing the
// live rows' K/V into layer `layer` of `kv` at their slots before attending (causal or not as
// batch.causal says). batch.rows ≤ scratch.max_rows().
void RunDeviceDecoderLayer(const GemmContext& gemm, const DeviceLayerWeights& w,
                           const LayerDims& dims, const DeviceBatchView& batch, int32_t layer,
                           DeviceKvCache& kv, DeviceForwardScratch& scratch, cudaStream_t stream);

}  // namespace dscale::cuda
