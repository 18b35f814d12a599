// Worst-case norms through the small models, layer by layer (docs/INFLATE.md, "Vocabulary"):
//   a normed row n = x/√(mean(x²) + ε)·g has |n| < √d·max|g|;
//   attention: every head's output is a convex combination of value rows W_v·n, so the H heads
//     together have norm ≤ √H·‖W_v‖_F·√d·max|g_in|, and o_proj adds ≤ ‖W_o‖_F times that;
//   MLP: |silu(a)| ≤ |a|, so |silu(a)⊙b|₂ ≤ |a|₂·|b|₂ ≤ ‖W_gate‖_F·‖W_up‖_F·|n|², and down_proj
//     adds ≤ ‖W_down‖_F times that.
// The final residual row is the embedding row plus every layer's additions.

#include "inflate/pad_bounds.h"

#include <algorithm>
#include <cmath>

#include "model/decoder_weights.h"
#include "model/dspark_head.h"

namespace dscale {
namespace {

struct Reader {
  const Checkpoint& checkpoint;
  std::string prefix;

  Result<std::vector<float>> Read(const std::string& name, std::vector<int64_t> shape) const {
    return checkpoint.ReadF32(prefix + name, shape);
  }
};

double Frobenius(const std::vector<float>& values) {
  double sum = 0.0;
  for (const float v : values) sum += double{v} * v;
  return std::sqrt(sum);
}

double MaxAbs(const std::vector<float>& values) {
  double m = 0.0;
  for (const float v : values) m = std::max(m, std::fabs(double{v}));
  return m;
}

// The largest row norm of a [rows, cols] matrix.
double MaxRowNorm(const std::vector<float>& values, int64_t cols) {
  double best = 0.0;
  for (size_t start = 0; start < values.size(); start += static_cast<size_t>(cols)) {
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += double{values[start + c]} * values[start + c];
    best = std::max(best, sum);
  }
  return std::sqrt(best);
}

// How much one decoder layer can add to the residual row's norm; `context_gain` is the largest
// gain of rows the layer attends to besides its own normed input (the drafter's hidden_norm).
Result<double> LayerGrowth(const Reader& r, const DecoderConfig& c, int64_t layer,
                           double context_gain) {
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  auto read = [&](const char* suffix, std::vector<int64_t> shape) {
    return r.Read(LayerTensorName("", layer, suffix), std::move(shape));
  };
  DSCALE_ASSIGN_OR_RETURN(std::vector<float> in_norm, read("input_layernorm", {h}));
  DSCALE_ASSIGN_OR_RETURN(std::vector<float> post_norm, read("post_attention_layernorm", {h}));
  DSCALE_ASSIGN_OR_RETURN(std::vector<float> v, read("self_attn.v_proj", {c.kv_dim(), h}));
  DSCALE_ASSIGN_OR_RETURN(std::vector<float> o, read("self_attn.o_proj", {h, c.q_dim()}));
  DSCALE_ASSIGN_OR_RETURN(std::vector<float> gate, read("mlp.gate_proj", {inter, h}));
  DSCALE_ASSIGN_OR_RETURN(std::vector<float> up, read("mlp.up_proj", {inter, h}));
  DSCALE_ASSIGN_OR_RETURN(std::vector<float> down, read("mlp.down_proj", {h, inter}));
  const double root_d = std::sqrt(static_cast<double>(h));
  const double attended = root_d * std::max(MaxAbs(in_norm), context_gain);
  const double attention = std::sqrt(static_cast<double>(c.num_attention_heads)) * Frobenius(v) *
                           attended * Frobenius(o);
  const double normed = root_d * MaxAbs(post_norm);
  const double mlp = Frobenius(gate) * Frobenius(up) * normed * normed * Frobenius(down);
  return attention + mlp;
}

// The bound on the final residual row's norm of a model whose rows start as embedding rows.
Result<double> ResidualNormBound(const Reader& r, const DecoderConfig& c, double embed_norm,
                                 double context_gain) {
  double bound = embed_norm;
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    DSCALE_ASSIGN_OR_RETURN(double growth, LayerGrowth(r, c, layer, context_gain));
    bound += growth;
  }
  return bound;
}

}  // namespace

Result<SourceBounds> MeasureSourceBounds(const Checkpoint& target, const DecoderConfig& t,
                                         const Checkpoint& drafter,
                                         const std::string& drafter_prefix, const DFlashConfig& d) {
  const Reader target_reader{target, kTargetPrefix};
  const Reader drafter_reader{drafter, drafter_prefix};
  const int64_t h = t.hidden_size;
  DSCALE_ASSIGN_OR_RETURN(std::vector<float> embed,
                          target.ReadF32(kTargetEmbedName, {t.vocab_size, h}));
  const double embed_norm = MaxRowNorm(embed, h);
  double head_norm = embed_norm;
  if (!t.tie_word_embeddings) {
    DSCALE_ASSIGN_OR_RETURN(std::vector<float> head,
                            target.ReadF32(kTargetLmHeadName, {t.vocab_size, h}));
    head_norm = MaxRowNorm(head, h);
  }
  DSCALE_ASSIGN_OR_RETURN(std::vector<float> final_norm, target.ReadF32(kTargetFinalNormName, {h}));
  DSCALE_ASSIGN_OR_RETURN(std::vector<float> draft_norm, drafter_reader.Read("norm.weight", {h}));
  DSCALE_ASSIGN_OR_RETURN(std::vector<float> hidden_norm,
                          drafter_reader.Read("hidden_norm.weight", {h}));
  SourceBounds b;
  b.target_final_gain = MaxAbs(final_norm);
  b.drafter_final_gain = MaxAbs(draft_norm);
  // |logit| = |n·W_v| ≤ |n|·|W_v| < √d·max|g|·max_v |W_v|.
  b.logit_bound = std::sqrt(static_cast<double>(h)) *
                  std::max(b.target_final_gain, b.drafter_final_gain) * head_norm;
  DSCALE_ASSIGN_OR_RETURN(double target_rows, ResidualNormBound(target_reader, t, embed_norm, 0.0));
  DSCALE_ASSIGN_OR_RETURN(double draft_rows, ResidualNormBound(drafter_reader, d.draft, embed_norm,
                                                               MaxAbs(hidden_norm)));
  const double rows = std::max(target_rows, draft_rows);
  b.residual_rms_bound =
      std::sqrt(rows * rows / static_cast<double>(h) + static_cast<float>(t.rms_norm_eps));
  return b;
}

Result<double> MeasureCorrectionBound(const Checkpoint& head, const DominoHeadConfig& config,
                                      int64_t hidden, int64_t vocab, double final_gain) {
  const int64_t state = config.gru_hidden_size, bottleneck = config.bottleneck_size;
  const int64_t in_cols = hidden + state;
  DSCALE_ASSIGN_OR_RETURN(std::vector<float> in,
                          head.ReadF32("correction.proj_in.weight", {bottleneck, in_cols}));
  DSCALE_ASSIGN_OR_RETURN(std::vector<float> out,
                          head.ReadF32("correction.proj_out.weight", {vocab, bottleneck}));
  const double z_norm = std::sqrt(static_cast<double>(hidden)) * final_gain;
  std::vector<double> unit_bound(static_cast<size_t>(bottleneck));
  for (int64_t b = 0; b < bottleneck; ++b) {
    const float* row = in.data() + b * in_cols;
    double z_sq = 0.0, s_abs = 0.0;
    for (int64_t i = 0; i < hidden; ++i) z_sq += double{row[i]} * row[i];
    for (int64_t j = 0; j < state; ++j) s_abs += std::fabs(double{row[hidden + j]});
    unit_bound[static_cast<size_t>(b)] = std::sqrt(z_sq) * z_norm + s_abs;
  }
  double bound = 0.0;
  for (int64_t v = 0; v < vocab; ++v) {
    double sum = 0.0;
    for (int64_t b = 0; b < bottleneck; ++b)
      sum += std::fabs(double{out[v * bottleneck + b]}) * unit_bound[static_cast<size_t>(b)];
    bound = std::max(bound, sum);
  }
  return bound;
}

Result<double> MeasureMarkovBiasBound(const Checkpoint& drafter, const std::string& prefix,
                                      const DSparkHeadConfig& config, int64_t vocab) {
  if (!config.has_markov_head()) return 0.0;
  const int64_t r = config.markov_rank;
  const Reader read{drafter, prefix};
  DSCALE_ASSIGN_OR_RETURN(std::vector<float> w1, read.Read(kDSparkW1Name, {vocab, r}));
  DSCALE_ASSIGN_OR_RETURN(std::vector<float> w2, read.Read(kDSparkW2Name, {vocab, r}));
  std::vector<double> input_bound(static_cast<size_t>(r), 1.0);
  if (config.markov_head_type != MarkovHeadType::kRnn) {
    std::fill(input_bound.begin(), input_bound.end(), 0.0);
    for (int64_t t = 0; t < vocab; ++t) {
      for (int64_t i = 0; i < r; ++i) {
        double& x = input_bound[static_cast<size_t>(i)];
        x = std::max(x, std::fabs(double{w1[t * r + i]}));
      }
    }
  }
  double bound = 0.0;
  for (int64_t v = 0; v < vocab; ++v) {
    double sum = 0.0;
    for (int64_t i = 0; i < r; ++i)
      sum += std::fabs(double{w2[v * r + i]}) * input_bound[static_cast<size_t>(i)];
    bound = std::max(bound, sum);
  }
  return bound;
}

}  // namespace dscale
