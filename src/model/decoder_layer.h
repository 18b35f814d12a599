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
// A hybrid target (Qwen3.5) has two more forms of the token mixer. Its attention layers gate the
// attention output, o ← o · sigmoid(gate) before o_proj (q_proj's rows held as [queries | gates]),
// and may rotate part of each head (LayerDims::rope.rotary_dim). Its linear-attention layers run
// a Gated DeltaNet in place of attention (kernels/cpu/linear_attention.h states the math):
//   [qkv | z | b | a] = in_proj(x̂);  qkv ← silu(causal_conv(qkv));  o = delta_rule(q, k, v, b, a)
//   x += out_proj(RMSNorm(o) · w · silu(z))   (per value head)
// each request's conv window and delta state carried in its sequence state (kv/recurrent_state.h).

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

// A Gated DeltaNet layer's sizes (io/decoder_config.h's GatedDeltaNetConfig); zero without one.
struct LinearDims {
  int32_t key_heads = 0;
  int32_t value_heads = 0;
  int32_t key_dim = 0;
  int32_t value_dim = 0;
  int32_t conv_kernel = 0;

  int64_t key_width() const { return int64_t{key_heads} * key_dim; }
  int64_t value_width() const { return int64_t{value_heads} * value_dim; }
  int64_t conv_dim() const { return 2 * key_width() + value_width(); }
  // in_proj's rows: [qkv (conv_dim) | z (value_width) | b (value_heads) | a (value_heads)].
  int64_t in_proj_rows() const { return conv_dim() + value_width() + 2 * int64_t{value_heads}; }
  static LinearDims From(const GatedDeltaNetConfig& l);
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
  MoeDims moe;               // the sparse layers' (a layer is sparse when its weights hold experts)
  LinearDims linear;         // the linear layers' (a layer is linear when its weights hold one)
  bool output_gate = false;  // attention output · sigmoid(gate), gates after the queries

  int64_t q_dim() const { return int64_t{heads} * head_dim; }
  int64_t q_rows() const { return output_gate ? 2 * q_dim() : q_dim(); }
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
// With `batch` (whose spans tile the rows), the experts its spans' first rows wake are counted
// (core/expert_occupancy.h).
template <class Ops>
void RunSparseMlp(Ops& ops, const auto& moe, const LayerDims& d, int32_t rows, const float* normed,
                  auto& s, float* x, const BatchView* batch = nullptr) {
  const MoeDims& m = d.moe;
  float* logits = ops.Buffer(s.router_logits, int64_t{rows} * m.experts);
  ops.Gemm(normed, d.hidden, moe.router, logits, m.experts, rows, /*accumulate=*/false);
  int32_t* ids = ops.IndexBuffer(s.route_ids, int64_t{rows} * m.top_k);
  float* weights = ops.Buffer(s.route_weights, int64_t{rows} * m.top_k);
  ops.RouteTopK(logits, rows, m, ids, weights);
  if (batch != nullptr) ops.CountSpanExperts(*batch, ids, m, s);
  ops.ExpertProducts(normed, moe, d, rows, ids, weights, s, x);
}

// x [rows, hidden] += a Gated DeltaNet over the normed rows (the file's comment), each span's rows
// in order from its request's state, which they advance (ops.RecurrentSpans). Scratch: qkv holds
// in_proj's rows, conv their conv outputs, attn the delta rule's.
template <class Ops>
void RunGatedDeltaNet(Ops& ops, const auto& w, const LayerDims& d, const BatchView& batch,
                      int32_t layer, const float* normed, auto& s, float* x) {
  const int32_t rows = batch.rows;
  const LinearDims& l = d.linear;
  const int64_t cols = l.in_proj_rows();
  float* proj = ops.Buffer(s.qkv, rows * cols);
  float* mixed = ops.Buffer(s.conv, rows * l.conv_dim());
  float* o = ops.Buffer(s.attn, rows * l.value_width());
  ops.Gemm(normed, d.hidden, w.in_proj, proj, cols, rows, /*accumulate=*/false);
  ops.RecurrentSpans(batch, layer, w, l, proj, cols, mixed, o);
  ops.GatedRmsNorm(o, proj + l.conv_dim(), cols, w.norm.data(), rows, l.value_heads, l.value_dim,
                   d.eps);
  ops.Gemm(o, l.value_width(), w.out_proj, x, d.hidden, rows, /*accumulate=*/true);
}

// The layer's second half: x += MLP(RMSNorm(x)), dense or sparse; `normed` is overwritten.
template <class Ops>
void RunLayerMlp(Ops& ops, const auto& w, const LayerDims& d, const BatchView& batch, float* normed,
                 auto& s, float* x) {
  const int32_t rows = batch.rows;
  ops.RmsNorm(x, w.post_norm.data(), normed, rows, d.hidden, d.eps);
  if (w.moe.empty()) {
    RunDenseMlp(ops, w, d, rows, normed, s, x);
  } else {
    RunSparseMlp(ops, w.moe, d, rows, normed, s, x, &batch);
  }
}

// Runs the layer in place on the residual stream x [batch.rows, hidden], storing the live rows'
// K/V into layer `layer` of `kv` at their slots before attending (batch.causal,
// batch.tile_rows), or, in a linear-attention layer, advancing each span's recurrent state.
// `w`, `kv` and the scratch `s` (buffers normed, qkv, attn, gate_up, act; in sparse layers
// router_logits, route_ids, route_weights and the experts' own; in linear layers conv) are the
// backend's types; `x` lies in the backend's memory.
template <class Ops>
void RunDecoderLayer(Ops& ops, const auto& w, const LayerDims& d, const BatchView& batch,
                     int32_t layer, auto& kv, auto& s, float* x) {
  const int32_t rows = batch.rows;
  float* normed = ops.Buffer(s.normed, rows * d.hidden);
  ops.RmsNorm(x, w.input_norm.data(), normed, rows, d.hidden, d.eps);
  if constexpr (Ops::kLinearAttention) {
    if (!w.linear.empty()) {
      RunGatedDeltaNet(ops, w.linear, d, batch, layer, normed, s, x);
      RunLayerMlp(ops, w, d, batch, normed, s, x);
      return;
    }
  }
  const int64_t q_dim = d.q_dim(), kv_dim = d.kv_dim();
  const int64_t cols = d.q_rows() + 2 * kv_dim;
  float* qkv = ops.Buffer(s.qkv, rows * cols);
  ops.Gemm(normed, d.hidden, w.qkv, qkv, cols, rows, /*accumulate=*/false);
  // qkv row: [q heads | (gates) | k heads | v heads]; q and k get per-head RMSNorm (qk_norm),
  // then RoPE.
  float* q = qkv;
  float* k = qkv + d.q_rows();
  if (d.qk_norm) {
    ops.HeadRmsNorm(q, w.q_norm.data(), rows, d.heads, d.head_dim, cols, d.eps);
    ops.HeadRmsNorm(k, w.k_norm.data(), rows, d.kv_heads, d.head_dim, cols, d.eps);
  }
  ops.Rope(q, batch.positions, rows, d.heads, d.head_dim, cols, d.rope);
  ops.Rope(k, batch.positions, rows, d.kv_heads, d.head_dim, cols, d.rope);
  ops.StoreKv(kv, layer, batch, k, k + kv_dim, cols);
  float* attn = ops.Buffer(s.attn, rows * q_dim);
  ops.Attention(kv, layer, batch, d, q, cols, attn);
  if constexpr (Ops::kLinearAttention) {
    if (d.output_gate) ops.SigmoidGate(attn, qkv + q_dim, cols, rows, q_dim);
  }
  ops.Gemm(attn, q_dim, w.o_proj, x, d.hidden, rows, /*accumulate=*/true);
  RunLayerMlp(ops, w, d, batch, normed, s, x);
}

// Grows `buffer` to at least `size` elements and returns its data.
template <typename T>
T* GrowBuffer(std::vector<T>& buffer, size_t size) {
  if (buffer.size() < size) buffer.resize(size);
  return buffer.data();
}

}  // namespace dscale
