#include "model/decoder_layer.h"

#include <cmath>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"

namespace dscale {
namespace {

void AttentionHalf(const Qwen3LayerWeights& w, const LayerDims& d, const StepBatch& batch,
                   int32_t layer, KvStore& store, LayerScratch& s, float* x) {
  const int32_t rows = batch.rows();
  const int64_t q_dim = d.q_dim(), kv_dim = d.kv_dim();
  const int64_t qkv_cols = q_dim + 2 * kv_dim;
  float* normed = GrowBuffer(s.normed, rows * d.hidden);
  float* qkv = GrowBuffer(s.qkv, rows * qkv_cols);
  cpu::RmsNorm(x, w.input_norm.data(), normed, rows, d.hidden, d.eps);
  Project(normed, w.qkv, qkv, rows);
  // qkv row: [q heads | k heads | v heads]; q and k get per-head RMSNorm, then RoPE.
  float* q = qkv;
  float* k = qkv + q_dim;
  cpu::HeadRmsNorm(q, w.q_norm.data(), rows, d.heads, d.head_dim, qkv_cols, d.eps);
  cpu::HeadRmsNorm(k, w.k_norm.data(), rows, d.kv_heads, d.head_dim, qkv_cols, d.eps);
  cpu::ApplyRope(q, batch.positions().data(), rows, d.heads, d.head_dim, qkv_cols, d.rope_theta);
  cpu::ApplyRope(k, batch.positions().data(), rows, d.kv_heads, d.head_dim, qkv_cols, d.rope_theta);
  for (int32_t r = 0; r < rows; ++r) {
    store.Store(layer, batch.kv_slots()[static_cast<size_t>(r)], k + r * qkv_cols,
                k + kv_dim + r * qkv_cols);
  }

  float* attn = GrowBuffer(s.attn, rows * q_dim);
  const cpu::AttentionParams params{
      .q = q,
      .q_row_stride = qkv_cols,
      .out = attn,
      .heads = d.heads,
      .kv_heads = d.kv_heads,
      .head_dim = d.head_dim,
      .scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.head_dim))),
      .causal = batch.causal,
      .spans = batch.spans().data(),
      .num_spans = batch.num_spans(),
      .kv = store.Layer(layer)};
  cpu::PagedAttention(params, batch.tile_rows);
  Project(attn, w.o_proj, x, rows, /*accumulate=*/true);
}

void MlpHalf(const Qwen3LayerWeights& w, const LayerDims& d, int32_t rows, LayerScratch& s,
             float* x) {
  float* normed = GrowBuffer(s.normed, rows * d.hidden);
  float* gate_up = GrowBuffer(s.gate_up, rows * 2 * d.intermediate);
  float* act = GrowBuffer(s.act, rows * d.intermediate);
  cpu::RmsNorm(x, w.post_norm.data(), normed, rows, d.hidden, d.eps);
  Project(normed, w.gate_up, gate_up, rows);
  cpu::SwiGlu(gate_up, act, rows, d.intermediate);
  Project(act, w.down, x, rows, /*accumulate=*/true);
}

}  // namespace

LayerDims LayerDims::From(const Qwen3Config& c) {
  return {.hidden = c.hidden_size,
          .intermediate = c.intermediate_size,
          .heads = static_cast<int32_t>(c.num_attention_heads),
          .kv_heads = static_cast<int32_t>(c.num_key_value_heads),
          .head_dim = static_cast<int32_t>(c.head_dim),
          .eps = static_cast<float>(c.rms_norm_eps),
          .rope_theta = c.rope_theta};
}

void RunDecoderLayer(const Qwen3LayerWeights& w, const LayerDims& dims, const StepBatch& batch,
                     int32_t layer, KvStore& store, LayerScratch& scratch, float* x) {
  AttentionHalf(w, dims, batch, layer, store, scratch, x);
  MlpHalf(w, dims, batch.rows(), scratch, x);
}

}  // namespace dscale
