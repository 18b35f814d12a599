#include "reference_forward.h"

#include <cmath>

#include "kernels/reference/reference_kernels.h"

namespace dscale::testing {

ReferenceOutput ReferenceForward(const DecoderConfig& c, const DecoderWeights& w,
                                 const std::vector<int32_t>& tokens) {
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t h = c.hidden_size, q_dim = c.q_dim(), kv_dim = c.kv_dim(), d = c.head_dim;
  const int64_t inter = c.intermediate_size;
  const auto eps = static_cast<float>(c.rms_norm_eps);
  std::vector<int32_t> positions(n);
  for (int64_t i = 0; i < n; ++i) positions[i] = static_cast<int32_t>(i);

  ReferenceOutput out;
  std::vector<float> x(n * h), normed(n * h);
  // The reference reads every matrix as plain f32 (BF16 weights widen exactly).
  const std::vector<float> embed = w.embed.ToF32();
  ref::EmbeddingGather(embed.data(), c.vocab_size, h, tokens.data(), n, x.data());
  for (const DecoderLayerWeights& lw : w.layers) {
    const std::vector<float> qkv = lw.qkv.ToF32(), o_proj = lw.o_proj.ToF32();
    const std::vector<float> gate_up_w = lw.gate_up.ToF32(), down = lw.down.ToF32();
    // Separate q, k, v projections from the stacked matrix's row blocks.
    std::vector<float> q(n * q_dim), k(n * kv_dim), v(n * kv_dim);
    ref::RmsNorm(x.data(), lw.input_norm.data(), normed.data(), n, h, eps);
    ref::Linear(normed.data(), qkv.data(), q.data(), n, h, q_dim);
    ref::Linear(normed.data(), qkv.data() + q_dim * h, k.data(), n, h, kv_dim);
    ref::Linear(normed.data(), qkv.data() + (q_dim + kv_dim) * h, v.data(), n, h, kv_dim);
    if (c.qk_norm) {
      ref::HeadRmsNorm(q.data(), lw.q_norm.data(), n, c.num_attention_heads, d, q_dim, eps);
      ref::HeadRmsNorm(k.data(), lw.k_norm.data(), n, c.num_key_value_heads, d, kv_dim, eps);
    }
    ref::ApplyRope(q.data(), positions.data(), n, c.num_attention_heads, d, q_dim, c.rope());
    ref::ApplyRope(k.data(), positions.data(), n, c.num_key_value_heads, d, kv_dim, c.rope());

    // Causal attention, written out directly over the dense K/V.
    std::vector<float> attn(n * q_dim);
    const int64_t group = c.num_attention_heads / c.num_key_value_heads;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t head = 0; head < c.num_attention_heads; ++head) {
        const float* qi = &q[i * q_dim + head * d];
        const int64_t kv_head = head / group;
        std::vector<double> scores(i + 1);
        double max_score = -INFINITY, total = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e) dot += double(qi[e]) * k[j * kv_dim + kv_head * d + e];
          scores[j] = dot / std::sqrt(double(d));
          max_score = std::max(max_score, scores[j]);
        }
        for (double& s : scores) total += (s = std::exp(s - max_score));
        for (int64_t e = 0; e < d; ++e) {
          double acc = 0;
          for (int64_t j = 0; j <= i; ++j) acc += scores[j] * v[j * kv_dim + kv_head * d + e];
          attn[i * q_dim + head * d + e] = static_cast<float>(acc / total);
        }
      }
    }
    ref::Linear(attn.data(), o_proj.data(), x.data(), n, q_dim, h, /*accumulate=*/true);

    std::vector<float> gate_up(n * 2 * inter), act(n * inter);
    ref::RmsNorm(x.data(), lw.post_norm.data(), normed.data(), n, h, eps);
    ref::Linear(normed.data(), gate_up_w.data(), gate_up.data(), n, h, 2 * inter);
    ref::SwiGlu(gate_up.data(), act.data(), n, inter);
    ref::Linear(act.data(), down.data(), x.data(), n, inter, h, /*accumulate=*/true);
    out.residuals.push_back(x);
  }
  ref::RmsNorm(x.data(), w.final_norm.data(), normed.data(), n, h, eps);
  out.logits.resize(n * c.vocab_size);
  ref::Linear(normed.data(), w.LmHead().ToF32().data(), out.logits.data(), n, h, c.vocab_size);
  return out;
}

}  // namespace dscale::testing
