// Each large tensor from its small one (docs/INFLATE.md): matrices copy the small entries through
// the plan's row and column maps (writes into the residual stream scaled by λ), norms' gains are
// scaled, and a few entries are set outright — the constant dims in the embedding, the drafter's
// fc passing them on, the final norms' ±g on the first two, and the LM head's pad rows (−M, +M
// there). The recipes themselves: tensor_recipes.h.

#include "inflate/inflate_tensors.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/dtype.h"
#include "dvl/deterministic_random.h"
#include "inflate/tensor_recipes.h"
#include "model/decoder_weights.h"

namespace dscale {
namespace {

// The plan's maps, shared by the fillers.
struct Maps {
  SharedIndexMap hidden, vocab;
  SharedIndexMap q_rows, kv_rows, intermediate;
  Maps(const InflatePlan& p, const ModelLayout& layout)
      : hidden(ShareMap(p.hidden)),
        vocab(ShareMap(p.vocab)),
        q_rows(ShareMap(layout.q_rows)),
        kv_rows(ShareMap(layout.kv_rows)),
        intermediate(ShareMap(layout.intermediate)) {}
};

// A sparse target's router rows [E, D] for `layer`: each group of k experts shares one direction
// over the small hidden dims — per dim a value uniform in [−1, 1) from a counter hash of (layer,
// group, dim), in BF16 — so a row's top k is always one whole group (its members tie; a tie
// between groups has probability zero), and which group varies from token to token.
constexpr uint64_t kRouterSeed = 0x6a09e667f3bcc908;

std::vector<float> RouterRows(const InflatePlan& p, int64_t layer) {
  const MoeConfig& moe = p.large_target.moe;
  const int64_t big = p.large_target.hidden_size;
  std::vector<float> values(static_cast<size_t>(moe.num_experts * big), 0.0f);
  for (int64_t e = 0; e < moe.num_experts; ++e) {
    const auto group = static_cast<uint64_t>(e / moe.experts_per_token);
    for (int64_t j = 0; j < big; ++j) {
      const int64_t i = p.hidden[static_cast<size_t>(j)];
      if (i < 0) continue;
      const uint64_t h = dvl::SplitMix64Mix(kRouterSeed ^ (static_cast<uint64_t>(layer) << 40) ^
                                            (group << 24) ^ static_cast<uint64_t>(i));
      const double uniform = static_cast<double>(h >> 11) * 0x1p-53 * 2.0 - 1.0;
      values[static_cast<size_t>(e * big + j)] = Bf16ToF32(F32ToBf16(static_cast<float>(uniform)));
    }
  }
  return values;
}

// A sparse MLP block from the small dense one (docs/INFLATE.md, "Mixture-of-experts shapes"):
// the router (RouterRows), then every expert's projections — member m of each group holds the
// units layout.expert_units[m] names, its down_proj scaled by λ·k, so the group's k outputs,
// weighted 1/k each once renormalised, add up to the dense output. An identity layer keeps its
// router (its routing, and so its cost, stays real) over zero experts.
Status AddSparseMlp(const InflatePlan& p, const ModelLayout& layout, int64_t layer,
                    const std::string& prefix, TensorList& list) {
  const int32_t source_layer = layout.layers[static_cast<size_t>(layer)];
  const bool identity = source_layer < 0;
  const int64_t ref = identity ? 0 : source_layer;
  auto in = [&](const char* suffix) { return LayerTensorName(prefix, ref, suffix); };
  const DecoderConfig& small = p.small_target;
  const DecoderConfig& large = p.large_target;
  const MoeConfig& moe = large.moe;
  const int64_t d = small.hidden_size, big = large.hidden_size;
  const int64_t width = moe.expert_intermediate_size, small_inter = small.intermediate_size;
  DSCALE_RETURN_IF_ERROR(list.Values(LayerTensorName(prefix, layer, "mlp.gate"),
                                     {moe.num_experts, big}, RouterRows(p, layer),
                                     in("mlp.gate_proj")));
  const SharedIndexMap hidden = ShareMap(p.hidden);
  std::vector<SharedIndexMap> units;
  for (const IndexMap& member : layout.expert_units) units.push_back(ShareMap(member));
  const float down_scale = p.residual_scale * static_cast<float>(moe.experts_per_token);
  for (int64_t e = 0; e < moe.num_experts; ++e) {
    const SharedIndexMap& rows = units[static_cast<size_t>(e % moe.experts_per_token)];
    const std::string expert = "mlp.experts." + std::to_string(e) + ".";
    auto matrix = [&](const char* name, const char* source, std::vector<int64_t> shape,
                      std::vector<int64_t> source_shape, SharedIndexMap r, SharedIndexMap c,
                      float scale) {
      return list.Matrix({.name = LayerTensorName(prefix, layer, expert + name),
                          .shape = std::move(shape),
                          .source = in(source),
                          .source_shape = std::move(source_shape),
                          .rows = std::move(r),
                          .cols = std::move(c),
                          .scale = scale,
                          .zero = identity});
    };
    DSCALE_RETURN_IF_ERROR(
        matrix("gate_proj", "mlp.gate_proj", {width, big}, {small_inter, d}, rows, hidden, 1.0f));
    DSCALE_RETURN_IF_ERROR(
        matrix("up_proj", "mlp.up_proj", {width, big}, {small_inter, d}, rows, hidden, 1.0f));
    DSCALE_RETURN_IF_ERROR(matrix("down_proj", "mlp.down_proj", {big, width}, {d, small_inter},
                                  hidden, rows, down_scale));
  }
  return Status::Ok();
}

// One large decoder layer, named with `prefix` in and out (the target's "model.", the drafter's
// ""): small layer layout.layers[layer], or an identity layer (zero weights: o_proj and down_proj
// add nothing).
Status AddLayer(const InflatePlan& p, const ModelLayout& layout, const DecoderConfig& small,
                const DecoderConfig& large, int64_t layer, const std::string& prefix,
                TensorList& list) {
  const Maps m(p, layout);
  const int32_t source_layer = layout.layers[static_cast<size_t>(layer)];
  const bool identity = source_layer < 0;
  const int64_t ref = identity ? 0 : source_layer;  // identity layers take layer 0's dtypes
  auto out = [&](const char* suffix) { return LayerTensorName(prefix, layer, suffix); };
  auto in = [&](const char* suffix) { return LayerTensorName(prefix, ref, suffix); };
  const int64_t d = small.hidden_size, big = large.hidden_size;
  const float lambda = p.residual_scale;

  auto gains = [&](const char* suffix, int64_t n, const IndexMap& map, double scale) -> Status {
    std::vector<float> values(map.size(), 0.0f);
    if (!identity) {
      DSCALE_ASSIGN_OR_RETURN(std::vector<float> g, list.Read(in(suffix), {n}));
      values = MapGains(g, map, scale);
    }
    return list.Gains(out(suffix), std::move(values), in(suffix));
  };
  auto matrix = [&](const char* suffix, std::vector<int64_t> shape, std::vector<int64_t> source,
                    SharedIndexMap rows, SharedIndexMap cols, float scale) {
    return list.Matrix({.name = out(suffix),
                        .shape = std::move(shape),
                        .source = in(suffix),
                        .source_shape = std::move(source),
                        .rows = rows,
                        .cols = cols,
                        .scale = scale,
                        .zero = identity});
  };
  DSCALE_RETURN_IF_ERROR(gains("input_layernorm", d, p.hidden, p.hidden_gain_scale));
  // Without q/k norms (Llama) the attention scale 1/√h' → 1/√h goes on q_proj; with them on
  // k_norm's gains (docs/INFLATE.md, "Attention scale").
  const auto query_scale = static_cast<float>(small.qk_norm ? 1.0 : p.query_scale);
  DSCALE_RETURN_IF_ERROR(matrix("self_attn.q_proj", {large.q_dim(), big}, {small.q_dim(), d},
                                m.q_rows, m.hidden, query_scale));
  DSCALE_RETURN_IF_ERROR(matrix("self_attn.k_proj", {large.kv_dim(), big}, {small.kv_dim(), d},
                                m.kv_rows, m.hidden, 1.0f));
  DSCALE_RETURN_IF_ERROR(matrix("self_attn.v_proj", {large.kv_dim(), big}, {small.kv_dim(), d},
                                m.kv_rows, m.hidden, 1.0f));
  DSCALE_RETURN_IF_ERROR(matrix("self_attn.o_proj", {big, large.q_dim()}, {d, small.q_dim()},
                                m.hidden, m.q_rows, lambda));
  if (small.qk_norm) {
    DSCALE_RETURN_IF_ERROR(gains("self_attn.q_norm", small.head_dim, p.head_dim, 1.0));
    DSCALE_RETURN_IF_ERROR(gains("self_attn.k_norm", small.head_dim, p.head_dim, p.key_gain_scale));
  }
  DSCALE_RETURN_IF_ERROR(gains("post_attention_layernorm", d, p.hidden, p.hidden_gain_scale));
  if (large.IsSparseLayer(layer)) return AddSparseMlp(p, layout, layer, prefix, list);
  const int64_t inter = large.intermediate_size, small_inter = small.intermediate_size;
  DSCALE_RETURN_IF_ERROR(
      matrix("mlp.gate_proj", {inter, big}, {small_inter, d}, m.intermediate, m.hidden, 1.0f));
  DSCALE_RETURN_IF_ERROR(
      matrix("mlp.up_proj", {inter, big}, {small_inter, d}, m.intermediate, m.hidden, 1.0f));
  return matrix("mlp.down_proj", {big, inter}, {d, small_inter}, m.hidden, m.intermediate, lambda);
}

// A final norm's gains: the slots scaled by final_gain_scale(), +g and −g on the first two
// constant dims (their products with the LM head cancel in real rows), 0 on the others.
Status AddFinalNorm(const InflatePlan& p, const std::string& name, const std::string& source,
                    float constant_gain, TensorList& list) {
  DSCALE_ASSIGN_OR_RETURN(std::vector<float> g, list.Read(source, {p.small_target.hidden_size}));
  std::vector<float> values = MapGains(g, p.hidden, p.final_gain_scale());
  if (!p.constant_dims.empty()) {
    values[static_cast<size_t>(p.constant_dims[0])] = constant_gain;
    values[static_cast<size_t>(p.constant_dims[1])] = -constant_gain;
  }
  return list.Gains(name, std::move(values), source);
}

// Embedding rows: real ones λ·E_v with the constants; pad rows the constants only, or, when the
// matrix is also the LM head, the pad pattern (−M, +M) — pad ids never come from the tokenizer.
RowPatch EmbeddingPatch(const InflatePlan& p) {
  return [c = p.constant_dims, values = p.constant_values, vocab = p.small_target.vocab_size,
          tied = p.tied(), weight = p.pad_weight](int64_t row, float* out) {
    if (c.empty()) return;
    if (tied && row >= vocab) {
      out[c[0]] = -weight;
      out[c[1]] = weight;
      return;
    }
    for (size_t j = 0; j < c.size(); ++j) out[c[j]] = values[j];
  };
}

RowPatch PadRowPatch(const InflatePlan& p) {
  return [c = p.constant_dims, vocab = p.small_target.vocab_size, weight = p.pad_weight](
             int64_t row, float* out) {
    if (row < vocab || c.empty()) return;
    out[c[0]] = -weight;
    out[c[1]] = weight;
  };
}

// The large embedding, named `name`.
Status AddEmbedding(const InflatePlan& p, const std::string& name, TensorList& list) {
  const DecoderConfig& s = p.small_target;
  const DecoderConfig& l = p.large_target;
  return list.Matrix({.name = name,
                      .shape = {l.vocab_size, l.hidden_size},
                      .source = kTargetEmbedName,
                      .source_shape = {s.vocab_size, s.hidden_size},
                      .rows = ShareMap(p.vocab),
                      .cols = ShareMap(p.hidden),
                      .scale = p.residual_scale,
                      .patch = EmbeddingPatch(p)});
}

// The large LM head, named `name`: the embedding when tied, else the small head's rows (the
// small embedding's for a tied source) with the pad rows.
Status AddLmHead(const InflatePlan& p, const std::string& name, TensorList& list) {
  if (p.tied()) return AddEmbedding(p, name, list);
  const DecoderConfig& s = p.small_target;
  const DecoderConfig& l = p.large_target;
  return list.Matrix({.name = name,
                      .shape = {l.vocab_size, l.hidden_size},
                      .source = s.tie_word_embeddings ? kTargetEmbedName : kTargetLmHeadName,
                      .source_shape = {s.vocab_size, s.hidden_size},
                      .rows = ShareMap(p.vocab),
                      .cols = ShareMap(p.hidden),
                      .patch = PadRowPatch(p)});
}

}  // namespace

Result<std::vector<InflatedTensor>> InflatedTargetTensors(
    const InflatePlan& p, std::shared_ptr<const Checkpoint> source) {
  TensorList list(std::move(source), "");
  const DecoderConfig& s = p.small_target;
  const DecoderConfig& l = p.large_target;
  DSCALE_RETURN_IF_ERROR(AddEmbedding(p, kTargetEmbedName, list));
  for (int64_t layer = 0; layer < l.num_hidden_layers; ++layer) {
    DSCALE_RETURN_IF_ERROR(AddLayer(p, p.target, s, l, layer, kTargetPrefix, list));
  }
  DSCALE_RETURN_IF_ERROR(
      AddFinalNorm(p, kTargetFinalNormName, kTargetFinalNormName, p.target_constant_gain, list));
  if (!l.tie_word_embeddings) DSCALE_RETURN_IF_ERROR(AddLmHead(p, kTargetLmHeadName, list));
  return list.Take();
}

Result<std::vector<InflatedTensor>> InflatedTargetCopies(
    const InflatePlan& p, std::shared_ptr<const Checkpoint> source_target) {
  TensorList list(std::move(source_target), "");
  DSCALE_RETURN_IF_ERROR(AddEmbedding(p, kDSparkEmbedCopyName, list));
  DSCALE_RETURN_IF_ERROR(AddLmHead(p, kDSparkLmHeadCopyName, list));
  return list.Take();
}

Result<std::vector<InflatedTensor>> InflatedDrafterTensors(const InflatePlan& p,
                                                           std::shared_ptr<const Checkpoint> source,
                                                           const std::string& source_prefix) {
  TensorList list(std::move(source), source_prefix);
  const DecoderConfig& s = p.small_drafter.draft;
  const DecoderConfig& l = p.large_drafter.draft;
  const Maps m(p, p.drafter);
  // fc: feature block k of the large target's residual rows, column k·D + i, is small column
  // k·d + i; the constants of block 0 pass through to the same dims (weight 1), so hidden_norm
  // sees them as every other hidden norm does.
  const auto features = static_cast<int64_t>(p.small_drafter.target_layer_ids.size());
  IndexMap fc_cols;
  for (int64_t k = 0; k < features; ++k) {
    for (const int64_t i : p.hidden) fc_cols.push_back(i >= 0 ? k * s.hidden_size + i : -1);
  }
  RowPatch pass_constants = [c = p.constant_dims](int64_t row, float* out) {
    if (std::find(c.begin(), c.end(), row) != c.end()) out[row] = 1.0f;
  };
  DSCALE_RETURN_IF_ERROR(list.Matrix({.name = "fc.weight",
                                      .shape = {l.hidden_size, features * l.hidden_size},
                                      .source = "fc.weight",
                                      .source_shape = {s.hidden_size, features * s.hidden_size},
                                      .rows = m.hidden,
                                      .cols = ShareMap(fc_cols),
                                      .patch = pass_constants}));
  DSCALE_ASSIGN_OR_RETURN(std::vector<float> hidden_norm,
                          list.Read("hidden_norm.weight", {s.hidden_size}));
  DSCALE_RETURN_IF_ERROR(list.Gains("hidden_norm.weight",
                                    MapGains(hidden_norm, p.hidden, p.hidden_gain_scale),
                                    "hidden_norm.weight"));
  for (int64_t layer = 0; layer < l.num_hidden_layers; ++layer) {
    DSCALE_RETURN_IF_ERROR(AddLayer(p, p.drafter, s, l, layer, "", list));
  }
  DSCALE_RETURN_IF_ERROR(
      AddFinalNorm(p, "norm.weight", "norm.weight", p.drafter_constant_gain, list));
  return list.Take();
}

Result<std::vector<InflatedTensor>> InflatedDominoHeadTensors(
    const InflatePlan& p, std::shared_ptr<const Checkpoint> source) {
  if (!p.large_drafter.domino.has_value()) return std::vector<InflatedTensor>();
  TensorList list(std::move(source), "");
  const int64_t d = p.small_target.hidden_size, big = p.large_target.hidden_size;
  const int64_t vocab = p.small_target.vocab_size, large_vocab = p.large_target.vocab_size;
  const int64_t gates = 3 * p.large_drafter.domino->gru_hidden_size;
  const int64_t state = p.large_drafter.domino->gru_hidden_size;
  const int64_t bottleneck = p.large_drafter.domino->bottleneck_size;
  const SharedIndexMap hidden = ShareMap(p.hidden);
  const SharedIndexMap gate_rows = IdentityMap(gates);
  const SharedIndexMap bottleneck_map = IdentityMap(bottleneck);
  // The GRU input is a large embedding row: λ·e in the small dims, constants the columns skip.
  DSCALE_RETURN_IF_ERROR(list.Matrix({.name = "gru.weight_ih_l0",
                                      .shape = {gates, big},
                                      .source = "gru.weight_ih_l0",
                                      .source_shape = {gates, d},
                                      .rows = gate_rows,
                                      .cols = hidden,
                                      .scale = 1.0f / p.residual_scale}));
  DSCALE_RETURN_IF_ERROR(list.Copy("gru.weight_hh_l0", {gates, state}));
  // [z; s]: z, a final-normed row, then s after its D columns.
  IndexMap mlp_cols;
  const RowPatch scale_z = AppendFinalRowColumns(p, 0, &mlp_cols);
  AppendKeptColumns(d, state, &mlp_cols);
  DSCALE_RETURN_IF_ERROR(list.Matrix({.name = "correction.proj_in.weight",
                                      .shape = {bottleneck, big + state},
                                      .source = "correction.proj_in.weight",
                                      .source_shape = {bottleneck, d + state},
                                      .rows = bottleneck_map,
                                      .cols = ShareMap(std::move(mlp_cols)),
                                      .patch = scale_z}));
  // Pad rows get no correction: SetPadRows puts their logits below every corrected real one.
  DSCALE_RETURN_IF_ERROR(list.Matrix({.name = "correction.proj_out.weight",
                                      .shape = {large_vocab, bottleneck},
                                      .source = "correction.proj_out.weight",
                                      .source_shape = {vocab, bottleneck},
                                      .rows = ShareMap(p.vocab),
                                      .cols = bottleneck_map}));
  return list.Take();
}

}  // namespace dscale
