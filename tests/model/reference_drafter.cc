#include "reference_drafter.h"

#include <cmath>

#include "core/rope_spec.h"
#include "reference_forward.h"

namespace dscale::testing {
namespace {

using Rows = std::vector<double>;  // row-major [rows, cols]

// y[r, o] = Σ_i x[r, i] · w[o, i] for `out` rows of w starting at row `first`.
Rows Linear(const Rows& x, int64_t rows, int64_t in, const WeightMatrix& w, int64_t first,
            int64_t out) {
  Rows y(static_cast<size_t>(rows * out));
  std::vector<float> row(static_cast<size_t>(in));
  for (int64_t o = 0; o < out; ++o) {
    w.RowToF32(first + o, row.data());
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0.0;
      for (int64_t i = 0; i < in; ++i) sum += x[r * in + i] * row[i];
      y[r * out + o] = sum;
    }
  }
  return y;
}

// RMSNorm of every `dim` values (stride `dim`) with gain g.
void RmsNorm(Rows& x, int64_t dim, const std::vector<float>& g, double eps) {
  for (size_t at = 0; at < x.size(); at += static_cast<size_t>(dim)) {
    double sum_sq = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum_sq += x[at + i] * x[at + i];
    const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) x[at + i] *= inv * g[i];
  }
}

// Rotate-half RoPE of every head (head_dim values) of row r at positions[r].
void Rope(Rows& x, int64_t head_dim, const std::vector<int32_t>& positions, const RopeSpec& rope) {
  const int64_t half = head_dim / 2;
  const auto width = static_cast<int64_t>(x.size() / positions.size());
  for (size_t r = 0; r < positions.size(); ++r) {
    for (int64_t h = 0; h < width / head_dim; ++h) {
      double* v = x.data() + static_cast<int64_t>(r) * width + h * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const double angle = positions[r] * RopeInvFreq(rope, i, head_dim);
        const double a = v[i], b = v[i + half];
        v[i] = a * std::cos(angle) - b * std::sin(angle);
        v[i + half] = b * std::cos(angle) + a * std::sin(angle);
      }
    }
  }
}

}  // namespace

std::vector<double> ReferenceDraftLogits(const DFlashConfig& config, const DFlashWeights& w,
                                         const DecoderConfig& tc, const DecoderWeights& tw,
                                         const std::vector<int32_t>& context, int32_t anchor) {
  const DecoderConfig& dc = config.draft;
  const auto n = static_cast<int64_t>(context.size());
  const int64_t block = config.block_size, h = dc.hidden_size, hd = dc.head_dim;
  const int64_t heads = dc.num_attention_heads, kv_heads = dc.num_key_value_heads;
  const int64_t q_dim = heads * hd, kv_dim = kv_heads * hd, inter = dc.intermediate_size;
  const double eps = dc.rms_norm_eps;

  // c = hidden_norm(fc(features)) for the context rows.
  const ReferenceOutput target = ReferenceForward(tc, tw, context);
  const auto k_features = static_cast<int64_t>(config.target_layer_ids.size());
  const int64_t width = k_features * tc.hidden_size;
  Rows features(static_cast<size_t>(n * width));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t f = 0; f < k_features; ++f) {
      const std::vector<float>& residual =
          target.residuals[static_cast<size_t>(config.target_layer_ids[f])];
      for (int64_t i = 0; i < tc.hidden_size; ++i) {
        features[r * width + f * tc.hidden_size + i] = residual[r * tc.hidden_size + i];
      }
    }
  }
  Rows c = Linear(features, n, width, w.fc, 0, h);
  RmsNorm(c, h, w.hidden_norm, eps);

  std::vector<int32_t> ctx_positions(n), block_positions(block);
  for (int64_t i = 0; i < n; ++i) ctx_positions[i] = static_cast<int32_t>(i);
  for (int64_t j = 0; j < block; ++j) block_positions[j] = static_cast<int32_t>(n + j);

  // The block's embeddings, scaled.
  Rows x(static_cast<size_t>(block * h));
  std::vector<float> row(static_cast<size_t>(h));
  for (int64_t j = 0; j < block; ++j) {
    tw.embed.RowToF32(j == 0 ? anchor : config.mask_token_id, row.data());
    for (int64_t i = 0; i < h; ++i) x[j * h + i] = row[i] * config.input_embedding_scale;
  }

  for (int64_t layer = 0; layer < dc.num_hidden_layers; ++layer) {
    const DecoderLayerWeights& lw = w.layers[static_cast<size_t>(layer)];
    const DraftAttention mask = config.LayerAttention(layer);
    // Keys and values: the context's (no input norm), then the block's, at their positions.
    Rows k_ctx = Linear(c, n, h, lw.qkv, q_dim, kv_dim);
    const Rows v_ctx = Linear(c, n, h, lw.qkv, q_dim + kv_dim, kv_dim);
    Rows normed = x;
    RmsNorm(normed, h, lw.input_norm, eps);
    Rows q = Linear(normed, block, h, lw.qkv, 0, q_dim);
    Rows k_blk = Linear(normed, block, h, lw.qkv, q_dim, kv_dim);
    const Rows v_blk = Linear(normed, block, h, lw.qkv, q_dim + kv_dim, kv_dim);
    RmsNorm(q, hd, lw.q_norm, eps);
    RmsNorm(k_ctx, hd, lw.k_norm, eps);
    RmsNorm(k_blk, hd, lw.k_norm, eps);
    Rope(q, hd, block_positions, dc.rope());
    Rope(k_ctx, hd, ctx_positions, dc.rope());
    Rope(k_blk, hd, block_positions, dc.rope());
    const auto key = [&](int64_t pos, int64_t kv_head) {
      return pos < n ? &k_ctx[pos * kv_dim + kv_head * hd]
                     : &k_blk[(pos - n) * kv_dim + kv_head * hd];
    };
    const auto value = [&](int64_t pos, int64_t kv_head) {
      return pos < n ? &v_ctx[pos * kv_dim + kv_head * hd]
                     : &v_blk[(pos - n) * kv_dim + kv_head * hd];
    };
    const auto visible = [&](int64_t p, int64_t pos) {
      if (mask.causal && pos > p) return false;
      if (mask.window > 0 && (p - pos >= mask.window || pos - p >= mask.window)) return false;
      return true;
    };

    Rows attn(static_cast<size_t>(block * q_dim), 0.0);
    for (int64_t j = 0; j < block; ++j) {
      const int64_t p = n + j;
      for (int64_t head = 0; head < heads; ++head) {
        const int64_t kv_head = head / (heads / kv_heads);
        const double* qh = &q[j * q_dim + head * hd];
        std::vector<double> scores(static_cast<size_t>(n + block), -INFINITY);
        double max_score = -INFINITY;
        for (int64_t pos = 0; pos < n + block; ++pos) {
          if (!visible(p, pos)) continue;
          double dot = 0.0;
          const double* kh = key(pos, kv_head);
          for (int64_t e = 0; e < hd; ++e) dot += qh[e] * kh[e];
          scores[pos] = dot / std::sqrt(static_cast<double>(hd));
          max_score = std::max(max_score, scores[pos]);
        }
        double total = 0.0;
        for (double& s : scores) total += (s = std::exp(s - max_score));
        for (int64_t pos = 0; pos < n + block; ++pos) {
          if (scores[pos] == 0.0) continue;
          const double* vh = value(pos, kv_head);
          for (int64_t e = 0; e < hd; ++e)
            attn[j * q_dim + head * hd + e] += scores[pos] / total * vh[e];
        }
      }
    }
    const Rows o = Linear(attn, block, q_dim, lw.o_proj, 0, h);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];

    normed = x;
    RmsNorm(normed, h, lw.post_norm, eps);
    const Rows gate = Linear(normed, block, h, lw.gate_up, 0, inter);
    const Rows up = Linear(normed, block, h, lw.gate_up, inter, inter);
    Rows act(static_cast<size_t>(block * inter));
    for (size_t i = 0; i < act.size(); ++i) act[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
    const Rows down = Linear(act, block, inter, lw.down, 0, h);
    for (size_t i = 0; i < x.size(); ++i) x[i] += down[i];
  }

  // Rows 1 .. block − 1 through the final norm and the target's LM head.
  Rows tail(x.begin() + h, x.end());
  RmsNorm(tail, h, w.final_norm, eps);
  const WeightMatrix& head = tw.LmHead();
  return Linear(tail, block - 1, h, head, 0, head.rows());
}

}  // namespace dscale::testing
