// The inflation plan: shape validation, index maps, λ, ε, rope_theta and the constant dims. The
// derivations are in docs/INFLATE.md; comments here say which equation a line implements.

#include "inflate/inflate_plan.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "io/llama_shapes.h"
#include "io/qwen3_shapes.h"

namespace dscale {
namespace {

// The constant dims' squares must add up to their target to this relative precision: far below
// float rounding of the norms' sums of squares.
constexpr double kConstantPrecision = 0x1p-30;
constexpr int kMaxCorrectionDims = 4;

Status ShapeError(const std::string& field, const std::string& flag, const std::string& problem) {
  return InvalidArgument("inflated shape: field \"" + field + "\" (" + flag + "): " + problem);
}

Status AtLeast(const char* field, const char* flag, int64_t large, int64_t small,
               const char* whose) {
  if (large >= small) return Status::Ok();
  return ShapeError(field, flag,
                    std::to_string(large) + " is smaller than the source " + whose + "'s " +
                        std::to_string(small));
}

// Heads of one model: the large count a multiple of the large KV heads, and enough KV heads to
// keep each small group's query heads on (copies of) their own KV head.
Status CheckHeads(const DecoderConfig& small, const InflateShape& shape, const char* whose) {
  const int64_t heads = shape.num_attention_heads, kv = shape.num_key_value_heads;
  DSCALE_RETURN_IF_ERROR(
      AtLeast("num_attention_heads", "--heads", heads, small.num_attention_heads, whose));
  DSCALE_RETURN_IF_ERROR(
      AtLeast("num_key_value_heads", "--kv-heads", kv, small.num_key_value_heads, whose));
  if (heads % kv != 0) {
    return ShapeError(
        "num_attention_heads", "--heads",
        std::to_string(heads) + " is not a multiple of num_key_value_heads " + std::to_string(kv));
  }
  const int64_t small_group = small.num_attention_heads / small.num_key_value_heads;
  const int64_t large_group = heads / kv;
  const int64_t copies = (small_group + large_group - 1) / large_group;
  if (small.num_key_value_heads * copies > kv) {
    return ShapeError(
        "num_key_value_heads", "--kv-heads",
        "the source " + std::string(whose) + "'s " + std::to_string(small.num_key_value_heads) +
            " KV heads of " + std::to_string(small_group) + " query heads each need " +
            std::to_string(small.num_key_value_heads * copies) + " KV heads in groups of " +
            std::to_string(large_group) + ", got " + std::to_string(kv));
  }
  return Status::Ok();
}

// A sparse target from the dense source (docs/INFLATE.md, "Mixture-of-experts shapes"): groups
// of k experts always routed together (k | E), each member holding ⌈I / k⌉ of the source's units,
// weights renormalised so that a group's add up to one, every layer sparse.
Status CheckExperts(const DecoderConfig& target, const MoeConfig& moe) {
  if (moe.num_experts == 0) return Status::Ok();
  const int64_t k = moe.experts_per_token;
  if (k < 1 || moe.num_experts % k != 0) {
    return ShapeError("num_experts", "--experts",
                      std::to_string(moe.num_experts) +
                          " is not a multiple of num_experts_per_tok " + std::to_string(k) +
                          " (the experts are routed in groups of that many)");
  }
  const int64_t units = (target.intermediate_size + k - 1) / k;
  if (moe.expert_intermediate_size < units) {
    return ShapeError("moe_intermediate_size", "--expert-intermediate",
                      std::to_string(moe.expert_intermediate_size) + " cannot hold the source's " +
                          std::to_string(target.intermediate_size) + " MLP units split " +
                          std::to_string(k) + " ways (" + std::to_string(units) + " each)");
  }
  if (!moe.norm_topk_prob) {
    return ShapeError("norm_topk_prob", "--shape",
                      "the groups' routing weights must be renormalised to add up to one");
  }
  if (moe.decoder_sparse_step != 1 || !moe.mlp_only_layers.empty()) {
    return ShapeError("decoder_sparse_step", "--shape", "every layer must be sparse");
  }
  return Status::Ok();
}

Status CheckModel(const DecoderConfig& small, const InflateShape& shape, const char* whose) {
  DSCALE_RETURN_IF_ERROR(AtLeast("intermediate_size", "--intermediate", shape.intermediate_size,
                                 small.intermediate_size, whose));
  return CheckHeads(small, shape, whose);
}

// The drafter shares the target's ε and head_dim: the constant dims make up both models' norms at
// once (docs/INFLATE.md, "One ε").
Status CheckDrafterBelongs(const DecoderConfig& target, const DFlashConfig& drafter) {
  if (drafter.draft.rms_norm_eps != target.rms_norm_eps) {
    return InvalidArgument(
        "drafter config: field \"rms_norm_eps\": " + std::to_string(drafter.draft.rms_norm_eps) +
        " differs from the target's " + std::to_string(target.rms_norm_eps) +
        "; inflation needs one ε for both");
  }
  if (drafter.draft.head_dim != target.head_dim) {
    return InvalidArgument(
        "drafter config: field \"head_dim\": " + std::to_string(drafter.draft.head_dim) +
        " differs from the target's " + std::to_string(target.head_dim));
  }
  return Status::Ok();
}

Status CheckShape(const DecoderConfig& target, const DFlashConfig& drafter,
                  const InflateShape& shape) {
  DSCALE_RETURN_IF_ERROR(CheckDrafterBelongs(target, drafter));
  DSCALE_RETURN_IF_ERROR(
      AtLeast("hidden_size", "--hidden", shape.hidden_size, target.hidden_size, "target"));
  DSCALE_RETURN_IF_ERROR(AtLeast("num_hidden_layers", "--layers", shape.num_hidden_layers,
                                 target.num_hidden_layers, "target"));
  DSCALE_RETURN_IF_ERROR(
      AtLeast("vocab_size", "--vocab", shape.vocab_size, target.vocab_size, "target"));
  DSCALE_RETURN_IF_ERROR(
      AtLeast("head_dim", "--head-dim", shape.head_dim, target.head_dim, "target"));
  if (shape.head_dim % 2 != 0) {
    return ShapeError("head_dim", "--head-dim",
                      std::to_string(shape.head_dim) + " is odd; RoPE rotates pairs of dims");
  }
  DSCALE_RETURN_IF_ERROR(AtLeast("num_hidden_layers", "--draft-layers", shape.draft_layers,
                                 drafter.draft.num_hidden_layers, "drafter"));
  DSCALE_RETURN_IF_ERROR(CheckModel(target, shape, "target"));
  DSCALE_RETURN_IF_ERROR(CheckModel(drafter.draft, shape, "drafter"));
  DSCALE_RETURN_IF_ERROR(CheckExperts(target, shape.moe));
  const bool same_width = shape.hidden_size == target.hidden_size;
  if (same_width && (shape.head_dim != target.head_dim || shape.vocab_size != target.vocab_size)) {
    return ShapeError("hidden_size", "--hidden",
                      "a wider head_dim or vocabulary needs constant dims in a wider hidden "
                      "state; got the source's " +
                          std::to_string(target.hidden_size));
  }
  return Status::Ok();
}

// [h']: small head dim i < h/2 goes to r·i and i + h/2 to r·i + h'/2 (r = ⌊h'/h⌋), so rotate-half
// pairs stay pairs and, with rope_theta' = θ^(h'/(r·h)), keep their frequency:
// θ'^(−2·r·i/h') = θ^(−2i/h).
IndexMap HeadDimMap(int64_t small, int64_t large) {
  const int64_t r = large / small;
  IndexMap map(static_cast<size_t>(large), -1);
  for (int64_t i = 0; i < small / 2; ++i) {
    map[static_cast<size_t>(r * i)] = i;
    map[static_cast<size_t>(r * i + large / 2)] = i + small / 2;
  }
  return map;
}

double LargeRopeTheta(double theta, int64_t small_head, int64_t large_head) {
  const int64_t r = large_head / small_head;
  if (r * small_head == large_head) return theta;
  return std::pow(theta, static_cast<double>(large_head) / static_cast<double>(r * small_head));
}

// Small query head j (KV head k = j / g, slot t = j % g) goes to large KV head k·c + t / g' and
// query head (k·c + t / g')·g' + t % g', c = ⌈g / g'⌉: each small group keeps its KV head, copied
// c times when the large groups are smaller. Unused large heads stay −1.
void MapHeads(const DecoderConfig& small, const DecoderConfig& large, const IndexMap& head_dim,
              ModelLayout* layout) {
  const int64_t hd = large.head_dim, small_hd = small.head_dim;
  const int64_t g = small.num_attention_heads / small.num_key_value_heads;
  const int64_t large_g = large.num_attention_heads / large.num_key_value_heads;
  const int64_t copies = (g + large_g - 1) / large_g;
  layout->q_rows.assign(static_cast<size_t>(large.q_dim()), -1);
  layout->kv_rows.assign(static_cast<size_t>(large.kv_dim()), -1);
  for (int64_t j = 0; j < small.num_attention_heads; ++j) {
    const int64_t k = j / g, t = j % g;
    const int64_t large_kv = k * copies + t / large_g;
    const int64_t large_q = large_kv * large_g + t % large_g;
    for (int64_t d = 0; d < hd; ++d) {
      const int64_t source = head_dim[static_cast<size_t>(d)];
      if (source < 0) continue;
      layout->q_rows[static_cast<size_t>(large_q * hd + d)] = j * small_hd + source;
      layout->kv_rows[static_cast<size_t>(large_kv * hd + d)] = k * small_hd + source;
    }
  }
}

// Member m of each group of k experts holds units [m·u, (m + 1)·u) of the small MLP in its first
// rows (u = ⌈I / k⌉); the rest of its rows, and units past I, are zero.
std::vector<IndexMap> ExpertUnits(int64_t small_intermediate, const MoeConfig& moe) {
  std::vector<IndexMap> members;
  if (moe.num_experts == 0) return members;
  const int64_t k = moe.experts_per_token;
  const int64_t u = (small_intermediate + k - 1) / k;
  for (int64_t m = 0; m < k; ++m) {
    IndexMap& rows = members.emplace_back(static_cast<size_t>(moe.expert_intermediate_size), -1);
    for (int64_t j = 0; j < u && m * u + j < small_intermediate; ++j) rows[j] = m * u + j;
  }
  return members;
}

ModelLayout Layout(const DecoderConfig& small, const DecoderConfig& large, const IndexMap& head_dim,
                   std::vector<int32_t> layers) {
  ModelLayout layout;
  MapHeads(small, large, head_dim, &layout);
  layout.intermediate.assign(static_cast<size_t>(large.intermediate_size), -1);
  for (int64_t i = 0; i < small.intermediate_size; ++i) layout.intermediate[i] = i;
  layout.layers = std::move(layers);
  layout.expert_units = ExpertUnits(small.intermediate_size, large.moe);
  return layout;
}

IndexMap Prefix(int64_t large, int64_t small) {
  IndexMap map(static_cast<size_t>(large), -1);
  for (int64_t i = 0; i < small; ++i) map[static_cast<size_t>(i)] = i;
  return map;
}

// The largest BF16 value ≤ x (x > 0).
float Bf16Floor(double x) {
  float f = static_cast<float>(x);
  if (static_cast<double>(f) > x) f = std::nextafter(f, 0.0f);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return Bf16ToF32(static_cast<uint16_t>(bits >> 16));  // truncation rounds toward zero
}

// BF16 values whose squares add up to `total` (> 0) within kConstantPrecision: β twice (the pad
// pair), then corrections, each the BF16 floor of the root of what is left.
std::vector<float> ConstantValues(double total) {
  const float beta = Bf16Floor(std::sqrt(total / 2.0));
  std::vector<float> values = {beta, beta};
  double left = total - 2.0 * double{beta} * beta;
  for (int i = 0; i < kMaxCorrectionDims && left > total * kConstantPrecision; ++i) {
    const float gamma = Bf16Floor(std::sqrt(left));
    if (gamma <= 0.0f) break;
    values.push_back(gamma);
    left -= double{gamma} * gamma;
  }
  return values;
}

// λ, ε' and the constants for hidden d → D and head dim h → h' (docs/INFLATE.md, "One ε"):
// ε' = σ·ε with σ = h/h' makes the q/k norms exact; the hidden norms need
// Σc²/D + ε' = κ·ε with κ = λ²·d/D, so λ is the least power of two with κ ≥ 2σ and
// Σc² = D·(κ·ε − ε').
Status PlanConstants(const InflateShape& shape, InflatePlan* plan) {
  const DecoderConfig& small = plan->small_target;
  const double d = static_cast<double>(small.hidden_size);
  const double big = static_cast<double>(shape.hidden_size);
  const double sigma = static_cast<double>(small.head_dim) / static_cast<double>(shape.head_dim);
  // The kernels add ε as a float: the plan works with the float values. σ·ε rounds to σ·float(ε)
  // exactly when σ is a power of two (else within 2^-24 of it).
  const double eps = static_cast<float>(small.rms_norm_eps);
  plan->large_target.rms_norm_eps = sigma * small.rms_norm_eps;
  plan->hidden_gain_scale = std::sqrt(d / big);
  plan->key_gain_scale = std::sqrt(sigma);
  plan->query_scale = 1.0 / std::sqrt(sigma);
  if (shape.hidden_size == small.hidden_size) return Status::Ok();  // σ = κ = 1, λ = 1
  double lambda = 1.0;
  while (lambda * lambda * d < 2.0 * sigma * big) lambda *= 2.0;
  plan->residual_scale = static_cast<float>(lambda);
  const double eps_large = static_cast<float>(plan->large_target.rms_norm_eps);
  plan->constant_values = ConstantValues(eps * d * lambda * lambda - big * eps_large);
  const auto count = static_cast<int64_t>(plan->constant_values.size());
  if (small.hidden_size + count > shape.hidden_size) {
    return ShapeError("hidden_size", "--hidden",
                      std::to_string(shape.hidden_size) + " leaves no room for " +
                          std::to_string(count) + " constant dims after the source's " +
                          std::to_string(small.hidden_size));
  }
  for (int64_t i = 0; i < count; ++i) plan->constant_dims.push_back(small.hidden_size + i);
  return Status::Ok();
}

DecoderConfig LargeConfig(const DecoderConfig& small, const InflateShape& shape, int64_t layers,
                          int64_t intermediate) {
  DecoderConfig c = small;
  c.vocab_size = shape.vocab_size;
  c.hidden_size = shape.hidden_size;
  c.intermediate_size = intermediate;
  c.num_hidden_layers = layers;
  c.num_attention_heads = shape.num_attention_heads;
  c.num_key_value_heads = shape.num_key_value_heads;
  c.head_dim = shape.head_dim;
  c.rope_theta = LargeRopeTheta(small.rope_theta, small.head_dim, shape.head_dim);
  return c;
}

}  // namespace

std::optional<InflateShape> NamedInflateShape(std::string_view name) {
  std::optional<DecoderConfig> config = NamedQwen3Config(name);
  if (!config) config = NamedLlamaConfig(name);
  if (!config || config->HasLinearAttentionLayers()) return std::nullopt;
  InflateShape shape = ShapeOf(*config);
  // A mixture of experts' attention is its family's; the source family is the dense one.
  shape.family = config->family == ModelFamily::kQwen3Moe ? ModelFamily::kQwen3 : config->family;
  return shape;
}

std::string NamedInflateShapes() {
  std::string names;
  for (const auto* list : {&NamedQwen3ConfigNames(), &NamedLlamaConfigNames()}) {
    for (const std::string& name : *list) {
      if (NamedInflateShape(name)) names += (names.empty() ? "" : ", ") + name;
    }
  }
  return names;
}

InflateShape ShapeOf(const DecoderConfig& t) {
  return {.hidden_size = t.hidden_size,
          .intermediate_size = t.intermediate_size,
          .num_hidden_layers = t.num_hidden_layers,
          .num_attention_heads = t.num_attention_heads,
          .num_key_value_heads = t.num_key_value_heads,
          .head_dim = t.head_dim,
          .vocab_size = t.vocab_size,
          .tie_word_embeddings = t.tie_word_embeddings,
          .draft_layers = 0,
          .family = std::nullopt,
          .moe = t.moe};
}

double InflatePlan::final_gain_scale() const {
  return tied() ? hidden_gain_scale / residual_scale : hidden_gain_scale;
}

LayerPlacement PlaceLayers(int64_t small_layers, int64_t large_layers,
                           const std::vector<int32_t>& ids) {
  LayerPlacement p;
  p.layers.assign(static_cast<size_t>(large_layers), -1);
  const auto k = static_cast<int64_t>(ids.size());
  bool fits = std::is_sorted(ids.begin(), ids.end()) &&
              std::adjacent_find(ids.begin(), ids.end()) == ids.end();
  std::vector<int32_t> large_ids = DeriveTargetLayerIds(large_layers, k);
  // Small layers (ids[i−1], ids[i]] end at large_ids[i]; those after the last id follow it.
  for (int64_t i = 0; fits && i < k; ++i) {
    const int64_t span = ids[i] - (i == 0 ? -1 : ids[i - 1]);
    const int64_t room = large_ids[i] - (i == 0 ? -1 : large_ids[i - 1]);
    fits = large_ids[i] >= 0 && span <= room;
  }
  fits = fits && large_layers - large_ids.back() >= small_layers - ids.back();
  if (!fits) {
    p.feature_ids = ids;
    for (int64_t l = 0; l < small_layers; ++l) p.layers[l] = static_cast<int32_t>(l);
    return p;
  }
  p.feature_ids = large_ids;
  int64_t small = 0;
  for (int64_t i = 0; i < k; ++i) {
    for (; small <= ids[i]; ++small)
      p.layers[large_ids[i] - (ids[i] - small)] = static_cast<int32_t>(small);
  }
  for (; small < small_layers; ++small) {
    p.layers[large_ids.back() + (small - ids.back())] = static_cast<int32_t>(small);
  }
  return p;
}

void PlaceBeside(const InflatePlan& first, InflatePlan* other) {
  other->target = first.target;
  other->large_target = first.large_target;
  std::vector<int32_t>& ids = other->large_drafter.target_layer_ids;
  ids.clear();
  for (const int32_t small : other->small_drafter.target_layer_ids) {
    const auto& layers = first.target.layers;
    ids.push_back(
        static_cast<int32_t>(std::find(layers.begin(), layers.end(), small) - layers.begin()));
  }
}

Result<InflatePlan> PlanInflation(const DecoderConfig& target, const DFlashConfig& drafter,
                                  const InflateShape& requested) {
  // The construction (docs/INFLATE.md) takes Qwen3 targets (q/k norms) and Llama 3 ones (none:
  // the attention scale goes on q_proj instead); RoPE scaling is a function of each pair's
  // frequency, which the head-dim map keeps, so a llama3 rope_scaling carries over as it is.
  if (target.HasSparseLayers()) {
    return InvalidArgument("inflate: a mixture-of-experts target (" +
                           std::string(ModelFamilyName(target.family)) +
                           ") cannot be inflated yet");
  }
  if (target.HasLinearAttentionLayers()) {
    return InvalidArgument("inflate: a hybrid target (" +
                           std::string(ModelFamilyName(target.family)) +
                           ") with linear_attention layers cannot be inflated yet");
  }
  if (target.qk_norm != (target.family == ModelFamily::kQwen3)) {
    return InvalidArgument("inflate: a " + std::string(ModelFamilyName(target.family)) +
                           " target " + (target.qk_norm ? "with" : "without") +
                           " q/k norms cannot be inflated");
  }
  if (requested.family.has_value() && *requested.family != target.family) {
    return InvalidArgument("inflated shape: a " + std::string(ModelFamilyName(*requested.family)) +
                           " shape for a " + std::string(ModelFamilyName(target.family)) +
                           " target; the family is the source's (give the sizes instead)");
  }
  InflateShape shape = requested;
  if (shape.draft_layers == 0) shape.draft_layers = drafter.draft.num_hidden_layers;
  DSCALE_RETURN_IF_ERROR(CheckShape(target, drafter, shape));
  InflatePlan plan;
  plan.small_target = target;
  plan.small_drafter = drafter;
  const LayerPlacement placement =
      PlaceLayers(target.num_hidden_layers, shape.num_hidden_layers, drafter.target_layer_ids);
  plan.large_target = LargeConfig(target, shape, shape.num_hidden_layers, shape.intermediate_size);
  if (shape.moe.num_experts > 0) {
    plan.large_target.family = ModelFamily::kQwen3Moe;
    plan.large_target.moe = shape.moe;
  }
  // A tied large model needs a tied source: one matrix cannot be two different small ones.
  plan.large_target.tie_word_embeddings = shape.tie_word_embeddings && target.tie_word_embeddings;
  DSCALE_RETURN_IF_ERROR(PlanConstants(shape, &plan));
  plan.large_drafter = drafter;
  plan.large_drafter.draft =
      LargeConfig(drafter.draft, shape, shape.draft_layers, shape.intermediate_size);
  plan.large_drafter.draft.rms_norm_eps = plan.large_target.rms_norm_eps;
  plan.large_drafter.target_layer_ids = placement.feature_ids;
  plan.large_drafter.num_target_layers = shape.num_hidden_layers;
  // A Domino head keeps its config (file name, G, B), a DSpark drafter its heads' (rank r, the
  // head type, the confidence head's inputs) and layout: only their hidden and vocabulary sides
  // grow.

  plan.hidden = Prefix(shape.hidden_size, target.hidden_size);
  plan.vocab = Prefix(shape.vocab_size, target.vocab_size);
  plan.head_dim = HeadDimMap(target.head_dim, shape.head_dim);
  plan.target = Layout(target, plan.large_target, plan.head_dim, placement.layers);
  std::vector<int32_t> draft_layers(static_cast<size_t>(shape.draft_layers), -1);
  for (int64_t l = 0; l < drafter.draft.num_hidden_layers; ++l)
    draft_layers[l] = static_cast<int32_t>(l);
  plan.drafter = Layout(drafter.draft, plan.large_drafter.draft, plan.head_dim, draft_layers);
  return plan;
}

Status SetPadRows(const SourceBounds& bounds, InflatePlan* plan) {
  if (plan->constant_values.empty()) return Status::Ok();
  // Each final norm's constant gain: a power of two near its largest slot gain, so the pair adds
  // nothing to the gains' range (the logit error bounds scale with it).
  auto constant_gain = [&](double max_gain) {
    const double g = plan->final_gain_scale() * max_gain;
    return g > 0.0 ? std::exp2(std::floor(std::log2(g))) : 1.0;
  };
  const double g_target = constant_gain(bounds.target_final_gain);
  const double g_drafter = constant_gain(bounds.drafter_final_gain);
  plan->target_constant_gain = static_cast<float>(g_target);
  plan->drafter_constant_gain = static_cast<float>(g_drafter);
  // The normed first constant is β·g / √(κ·(m + ε)) ≥ β·g / (√κ·R), so a pad logit
  // −2·M·β·g/√(κ·(m + ε)) ≤ −(Λ + margin) ≤ (top real logit) − margin once
  // M = (Λ + C + margin)·√κ·R / (2·β·g), C the drafter head's correction bound (0 without).
  const double d = static_cast<double>(plan->small_target.hidden_size);
  const double lambda = plan->residual_scale;
  const double kappa = lambda * lambda * d / static_cast<double>(plan->large_target.hidden_size);
  const double beta = plan->constant_values[0];
  // A drafter head (Domino, DSpark) adds at most correction_bound to a real draft logit's
  // magnitude and nothing to a pad logit, so the margin must also cover it.
  const double m = (bounds.logit_bound + bounds.correction_bound + kPadLogitMargin) *
                   std::sqrt(kappa) * bounds.residual_rms_bound /
                   (2.0 * beta * std::min(g_target, g_drafter));
  const float bf16_max = Bf16ToF32(0x7f7f);
  if (!(m < bf16_max)) {
    return InvalidArgument("pad rows: the weight they need, " + std::to_string(m) +
                           ", is beyond BF16 (the source's residual bound " +
                           std::to_string(bounds.residual_rms_bound) + " is too large)");
  }
  float weight = Bf16ToF32(F32ToBf16(static_cast<float>(m)));
  if (weight < m) weight = Bf16ToF32(static_cast<uint16_t>(F32ToBf16(weight) + 1));
  plan->pad_weight = weight;
  return Status::Ok();
}

}  // namespace dscale
