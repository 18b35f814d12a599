#pragma once
// One pre-norm decoder layer (Qwen3, Llama, Qwen3-MoE), written once over a backend's operations
// (`Ops`: model/cpu_ops.h, model/cuda/cuda_ops.h) and shared by the target (causal attention) and
// the DFlash drafter (non-causal attention over its context plus its block):
//   x += o_proj(attention(rope(q_norm(q)), rope(k_norm(k)), v))   with q, k, v from RMSNorm(x)
// (q_norm and k_norm only where the family has them: Qwen3 and the DFlash drafters, not Llama)
//   x += down(silu(gate(x̂)) · up(x̂))                               with x̂ = RMSNorm(x)
// or, in a sparse MLP layer (a mixture of experts: Qwen3-MoE),
//   x += Σ_{j<k} w_j · down_{e_j}(silu(gate_{e_j}(x̂)) · up_{e_j}(x̂))
// over the row's top k experts e_j by p = softmax(router(x̂)) (f32; an exact tie goes to the lower
// expert index), w_j = p[e_j], divided by Σ_j p[e_j] when norm_topk_prob.

#include <cstdint>
#include <vector>

#include "io/decoder_config.h"
#include "model/batch_view.h"

namespace dscale {

// A sparse MLP layer's sizes (io/decoder_config.h's MoeConfig); zero in a dense model.
struct MoeDims {
  int32_t experts = 0;
  int32_t top_k = 0;         // experts per row
  int64_t intermediate = 0;  // each expert's width
  bool normalize = false;    // norm_topk_prob

  static MoeDims From(const MoeConfig& moe);
};

struct LayerDims {
  int64_t hidden = 0;
  int64_t intermediate = 0;
  int32_t heads = 0;
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
  float eps = 1e-6f;
  bool qk_norm = true;  // per-head RMSNorm of q and k before RoPE
  RopeSpec rope;
  MoeDims moe;  // the sparse layers' (a layer is sparse when its weights hold experts)

  int64_t q_dim() const { return int64_t{heads} * head_dim; }
  int64_t kv_dim() const { return int64_t{kv_heads} * head_dim; }
  static LayerDims From(const DecoderConfig& config);
};

// x [rows, hidden] += down(silu(gate(normed)) · up(normed)).
template <class Ops>
void RunDenseMlp(Ops& ops, const auto& w, const LayerDims& d, int32_t rows, const float* normed,
                 auto& s, float* x) {
  float* gate_up = ops.Buffer(s.gate_up, rows * 2 * d.intermediate);
  float* act = ops.Buffer(s.act, rows * d.intermediate);
  ops.Gemm(normed, d.hidden, w.gate_up, gate_up, 2 * d.intermediate, rows, /*accumulate=*/false);
  ops.SwiGlu(gate_up, act, rows, d.intermediate);
  ops.Gemm(act, d.intermediate, w.down, x, d.hidden, rows, /*accumulate=*/true);
}

// x [rows, hidden] += the row's routed experts' outputs, weighted (the sparse MLP of the file's
// comment): the router's logits [rows, experts] in f32, each row's top-k ids and weights [rows, k],
// then the experts' products, which must give a row the same bits whatever rows share the step.
template <class Ops>
void RunSparseMlp(Ops& ops, const auto& moe, const LayerDims& d, int32_t rows, const float* normed,
                  auto& s, float* x) {
  const MoeDims& m = d.moe;
  float* logits = ops.Buffer(s.router_logits, int64_t{rows} * m.experts);
  ops.Gemm(normed, d.hidden, moe.router, logits, m.experts, rows, /*accumulate=*/false);
  int32_t* ids = ops.IndexBuffer(s.route_ids, int64_t{rows} * m.top_k);
  float* weights = ops.Buffer(s.route_weights, int64_t{rows} * m.top_k);
  ops.RouteTopK(logits, rows, m, ids, weights);
  ops.ExpertProducts(normed, moe, d, rows, ids, weights, s, x);
}

// Runs the layer in place on the residual stream x [batch.rows, hidden], storing the live rows'
// K/V into layer `layer` of `kv` at their slots before attending (batch.causal,
// batch.tile_rows). `w`, `kv` and the scratch `s` (buffers normed, qkv, attn, gate_up, act; in
// sparse layers router_logits, route_ids, route_weights and the experts' own) are the backend's
// types; `x` lies in the backend's memory.
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

  ops.RmsNorm(x, w.post_norm.data(), normed, rows, d.hidden, d.eps);
  if (w.moe.empty()) {
    RunDenseMlp(ops, w, d, rows, normed, s, x);
  } else {
    RunSparseMlp(ops, w.moe, d, rows, normed, s, x);
  }
}

// Grows `buffer` to at least `size` elements and returns its data.
template <typename T>
T* GrowBuffer(std::vector<T>& buffer, size_t size) {
  if (buffer.size() < size) buffer.resize(size);
  return buffer.data();
}

}  // namespace dscale
