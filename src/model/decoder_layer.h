#pragma once
// One Qwen3 pre-norm decoder layer over the rows of a StepBatch, shared by the target (causal
// attention) and the DFlash drafter (non-causal attention over its context plus its block):
//   x += o_proj(attention(rope(q_norm(q)), rope(k_norm(k)), v))   with q, k, v from RMSNorm(x)
//   x += down(silu(gate(RMSNorm(x))) · up(RMSNorm(x)))

#include <cstdint>
#include <span>
#include <vector>

#include "core/step_batch.h"
#include "kernels/cpu/attention.h"
#include "kv/paged_kv_cache.h"
#include "model/qwen3_weights.h"

namespace dscale {

struct LayerDims {
  int64_t hidden = 0;
  int64_t intermediate = 0;
  int32_t heads = 0;
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
  float eps = 1e-6f;
  double rope_theta = 1e6;

  int64_t q_dim() const { return int64_t{heads} * head_dim; }
  int64_t kv_dim() const { return int64_t{kv_heads} * head_dim; }
  static LayerDims From(const Qwen3Config& config);
};

// Scratch buffers, grown on demand and reused across calls.
struct LayerScratch {
  std::vector<float> normed;   // [rows, hidden]
  std::vector<float> qkv;      // [rows, q_dim + 2·kv_dim]
  std::vector<float> attn;     // [rows, q_dim]
  std::vector<float> gate_up;  // [rows, 2·intermediate]
  std::vector<float> act;      // [rows, intermediate]
};

// Runs the layer in place on the residual stream x [batch.rows(), hidden], storing the rows' K/V
// into layer `layer` of `store` at their slots before attending (batch.causal, batch.tile_rows).
void RunDecoderLayer(const Qwen3LayerWeights& w, const LayerDims& dims, const StepBatch& batch,
                     int32_t layer, KvStore& store, LayerScratch& scratch, float* x);

// Grows `buffer` to at least `size` elements and returns its data.
template <typename T>
T* GrowBuffer(std::vector<T>& buffer, size_t size) {
  if (buffer.size() < size) buffer.resize(size);
  return buffer.data();
}

}  // namespace dscale
