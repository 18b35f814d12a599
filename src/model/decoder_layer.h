#pragma once
// One pre-norm decoder layer (Qwen3, Llama), written once over a backend's operations (`Ops`:
// model/cpu_ops.h, model/cuda/cuda_ops.h) and shared by the target (causal attention) and the
// DFlash drafter (non-causal attention over its context plus its block):
//   x += o_proj(attention(rope(q_norm(q)), rope(k_norm(k)), v))   with q, k, v from RMSNorm(x)
// (q_norm and k_norm only where the family has them: Qwen3 and the DFlash drafters, not Llama)
//   x += down(silu(gate(RMSNorm(x))) · up(RMSNorm(x)))

#include <cstdint>
#include <vector>

#include "io/decoder_config.h"
#include "model/batch_view.h"

namespace dscale {

struct LayerDims {
  int64_t hidden = 0;
  int64_t intermediate = 0;
  int32_t heads = 0;
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
  float eps = 1e-6f;
  bool qk_norm = true;  // per-head RMSNorm of q and k before RoPE
  RopeSpec rope;

  int64_t q_dim() const { return int64_t{heads} * head_dim; }
  int64_t kv_dim() const { return int64_t{kv_heads} * head_dim; }
  static LayerDims From(const DecoderConfig& config);
};

// Runs the layer in place on the residual stream x [batch.rows, hidden], storing the live rows'
// K/V into layer `layer` of `kv` at their slots before attending (batch.causal,
// batch.tile_rows). `w`, `kv` and the scratch `s` (buffers normed, qkv, attn, gate_up, act) are
// the backend's types; `x` lies in the backend's memory.
template <class Ops>
void RunDecoderLayer(Ops& ops, const auto& w, const LayerDims& d, const BatchView& batch,
                     int32_t layer, auto& kv, auto& s, float* x) {
  const int32_t rows = batch.rows;
  const int64_t q_dim = d.q_dim(), kv_dim = d.kv_dim();
  const int64_t cols = q_dim + 2 * kv_dim;
  float* normed = ops.Buffer(s.normed, rows * d.hidden);
  float* qkv = ops.Buffer(s.qkv, rows * cols);
  ops.RmsNorm(x, w.input_norm.data(), normed, rows, d.hidden, d.eps);
  ops.Gemm(normed, d.hidden, w.qkv, qkv, cols, rows, /*accumulate=*/false);
  // qkv row: [q heads | k heads | v heads]; q and k get per-head RMSNorm (qk_norm), then RoPE.
  float* q = qkv;
  float* k = qkv + q_dim;
  if (d.qk_norm) {
    ops.HeadRmsNorm(q, w.q_norm.data(), rows, d.heads, d.head_dim, cols, d.eps);
    ops.HeadRmsNorm(k, w.k_norm.data(), rows, d.kv_heads, d.head_dim, cols, d.eps);
  }
  ops.Rope(q, batch.positions, rows, d.heads, d.head_dim, cols, d.rope);
  ops.Rope(k, batch.positions, rows, d.kv_heads, d.head_dim, cols, d.rope);
  ops.StoreKv(kv, layer, batch, k, k + kv_dim, cols);
  float* attn = ops.Buffer(s.attn, rows * q_dim);
  ops.Attention(kv, layer, batch, d, q, cols, attn);
  ops.Gemm(attn, q_dim, w.o_proj, x, d.hidden, rows, /*accumulate=*/true);

  float* gate_up = ops.Buffer(s.gate_up, rows * 2 * d.intermediate);
  float* act = ops.Buffer(s.act, rows * d.intermediate);
  ops.RmsNorm(x, w.post_norm.data(), normed, rows, d.hidden, d.eps);
  ops.Gemm(normed, d.hidden, w.gate_up, gate_up, 2 * d.intermediate, rows, /*accumulate=*/false);
  ops.SwiGlu(gate_up, act, rows, d.intermediate);
  ops.Gemm(act, d.intermediate, w.down, x, d.hidden, rows, /*accumulate=*/true);
}

// Grows `buffer` to at least `size` elements and returns its data.
template <typename T>
T* GrowBuffer(std::vector<T>& buffer, size_t size) {
  if (buffer.size() < size) buffer.resize(size);
  return buffer.data();
}

}  // namespace dscale
