#pragma once
// The plan of a function-preserving inflation (docs/INFLATE.md): a trained small Qwen3 or Llama 3
// target and its DFlash or DSpark drafter rewritten at a larger shape, so that the large pair
// computes the small pair's logits, drafts and acceptance while holding and multiplying tensors of
// the large shape. The plan is arithmetic on the two configs (index maps, the residual scale, the
// constant dims, ε and rope_theta); SetPadRows adds what the padded vocabulary rows need from the
// weights.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "io/decoder_config.h"
#include "io/dflash_config.h"

namespace dscale {

// The large shape. The drafter takes the target's geometry (hidden, intermediate, heads, head
// dim), as z-lab's drafters do, and `draft_layers` layers (0: the source drafter's count).
struct InflateShape {
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t vocab_size = 0;
  bool tie_word_embeddings = false;
  int64_t draft_layers = 0;
  // A named shape's family: the source target must be of it (the sizes are the family's, the
  // layers the source's). Unset for a shape given by sizes alone.
  std::optional<ModelFamily> family;
  // A mixture-of-experts target (num_experts > 0; docs/INFLATE.md, "Mixture-of-experts
  // shapes"): every MLP of the dense source becomes a sparse block whose experts come in groups
  // of experts_per_token that split its units and are always routed together. The drafter
  // stays dense.
  MoeConfig moe;
};

// The shape of NamedQwen3Config(name) (io/qwen3_shapes.h, a mixture of experts as
// qwen3-30b-a3b included) or NamedLlamaConfig(name) (io/llama_shapes.h); nullopt for any other
// name, and for a hybrid (qwen3.5-4b, qwen3.5-9b): inflation makes attention-only targets.
std::optional<InflateShape> NamedInflateShape(std::string_view name);
// "qwen3-0.6b, ..., llama-3.1-8b", for messages.
std::string NamedInflateShapes();
// The source target's own shape (the starting point when only overrides are given).
InflateShape ShapeOf(const DecoderConfig& target);

// For each index of a large dimension, the index of the small one it copies, or −1 where the
// large tensor holds zero (or a constant the plan states).
using IndexMap = std::vector<int64_t>;

// Where one model's (the target's or the drafter's) heads, MLP units and layers go.
struct ModelLayout {
  IndexMap q_rows;              // [H'·h']: small q_proj row (= o_proj column) or −1
  IndexMap kv_rows;             // [G'·h']: small k_proj / v_proj row or −1
  IndexMap intermediate;        // [I']: small gate/up row (= down column) or −1
  std::vector<int32_t> layers;  // [L']: small layer, or −1 for an identity layer
  // A sparse target's experts: for the m-th member of every group of k
  // (m < experts_per_token), expert row j → small MLP unit, or −1: member m holds units
  // [m·u, (m + 1)·u) of the dense MLP, u = ⌈I / k⌉, in its first u rows. Empty when dense.
  std::vector<IndexMap> expert_units;
};

struct InflatePlan {
  DecoderConfig small_target, large_target;
  DFlashConfig small_drafter, large_drafter;
  IndexMap hidden;    // [D]: small hidden dim or −1 (the small dims are 0 .. d−1)
  IndexMap head_dim;  // [h']: small head dim or −1; RoPE pairs land on equal frequencies
  IndexMap vocab;     // [V']: small token or −1 (a pad row)
  ModelLayout target, drafter;
  // Hidden dims holding a constant in every residual row (the embedding writes it, no layer
  // does), with their values: the first two, equal (β), give the pad rows their logits; the
  // others only complete the norms' ε. Empty when the hidden size is unchanged.
  std::vector<int64_t> constant_dims;
  std::vector<float> constant_values;
  float residual_scale = 1.0f;     // λ, a power of two: the large residual stream is λ·x
  double hidden_gain_scale = 1.0;  // √(d/D), applied to every hidden-norm gain
  double key_gain_scale = 1.0;     // √(h/h'), applied to k_norm (the attention scale)
  // √(h'/h), applied to q_proj where the target has no q/k norms (Llama): the attention scale.
  double query_scale = 1.0;
  // Set by SetPadRows: the final norms' gains on the first two constant dims (+g, −g), and M,
  // the weight the LM head's pad rows put there (−M, +M).
  float target_constant_gain = 0.0f;
  float drafter_constant_gain = 0.0f;
  float pad_weight = 0.0f;

  bool tied() const { return large_target.tie_word_embeddings; }
  // The factor on the final norms' gains: √(d/D), and 1/λ when the LM head is the (λ-scaled)
  // embedding.
  double final_gain_scale() const;
  // The factor on the small columns of a matrix that reads a final-normed row (the LM head's
  // input; a Domino or DSpark head's, the predictor's hidden projection): λ when the LM head is
  // tied, as the rows then come out as y/λ, else 1. A power of two: exact.
  float final_row_scale() const { return tied() ? residual_scale : 1.0f; }
};

// Validates `shape` against the source pair and works out the plan. Errors name the field (and
// its flag): a dimension smaller than the source's, heads not a multiple of the KV heads, KV heads
// too few for the source's grouping, an odd head_dim, a hidden size without room for the constant
// dims, a drafter whose ε or head_dim differ from its target's; for a mixture of experts, experts
// not a multiple of experts_per_token, experts too narrow to hold the source's MLP split k ways,
// routing weights not renormalised, or dense layers among the sparse ones.
Result<InflatePlan> PlanInflation(const DecoderConfig& target, const DFlashConfig& drafter,
                                  const InflateShape& shape);

// Where the small target's layers go in a deeper one. The drafter's feature layers (small ids)
// move to the documented DFlash ids for the large depth (DeriveTargetLayerIds with one id per
// feature) when the small layers between them fit; otherwise they keep their ids and the identity
// layers go last.
struct LayerPlacement {
  std::vector<int32_t> feature_ids;  // large target_layer_ids, in the drafter's order
  std::vector<int32_t> layers;       // [L']: small layer or −1
};
LayerPlacement PlaceLayers(int64_t small_layers, int64_t large_layers,
                           const std::vector<int32_t>& feature_ids);

// Another drafter of the same target inflated beside `first` (`dscale inflate` with several
// drafters): `other` takes first's target plan (its layers placed for first's drafter), and its
// large target_layer_ids become the large layers its small ones were placed at (the residual
// after them is the small one's, as for first's). Both plans must come from PlanInflation with the
// same target and shape.
void PlaceBeside(const InflatePlan& first, InflatePlan* other);

// What the pad rows need from the source weights (pad_bounds.h measures it).
struct SourceBounds {
  double target_final_gain = 0.0;   // max |gain| of the target's final norm
  double drafter_final_gain = 0.0;  // of the drafter's final norm
  double logit_bound = 0.0;         // Λ ≥ |every real logit| of the target and the drafter
  double residual_rms_bound = 0.0;  // R ≥ √(mean(x²) + ε) of every final residual row x
  // C ≥ |every correction a drafter's head adds to a real draft logit| (a Domino head's, a DSpark
  // Markov head's bias); 0 without a head.
  double correction_bound = 0.0;
};

// Every pad logit is at most the row's top real logit minus this.
inline constexpr double kPadLogitMargin = 1000.0;

// Sets the constant-dim gains and M so that every pad logit stays kPadLogitMargin below the top
// real logit for any input (docs/INFLATE.md, "Vocabulary"). InvalidArgument when M does not fit
// BF16. A plan without constant dims has no pad rows and needs nothing.
Status SetPadRows(const SourceBounds& bounds, InflatePlan* plan);

}  // namespace dscale
