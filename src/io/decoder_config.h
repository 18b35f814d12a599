#pragma once
// A decoder-only target's `config.json`, family-neutral: the shapes, norms, RoPE, (for a
// mixture of experts) the sparse MLP layers and (for a hybrid) the linear-attention layers the
// model code needs, whichever family (`architectures` / `model_type`) the checkpoint is. Each
// family's reader (qwen3_config.h, llama_config.h, qwen3_5_config.h) fills it and refuses what
// that family's code would compute and this one does not.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/rope_spec.h"
#include "core/status.h"

namespace dscale {

enum class ModelFamily {
  kQwen3,     // Qwen3ForCausalLM: per-head q/k RMSNorm, unscaled RoPE
  kLlama,     // LlamaForCausalLM (Llama 3.x): no q/k norm, optional "llama3" RoPE scaling
  kQwen3Moe,  // Qwen3MoeForCausalLM: Qwen3's attention, sparse MLP layers (MoeConfig)
  // Qwen3_5ForConditionalGeneration / Qwen3_5ForCausalLM (Qwen3.5 and Qwen3.6, dense): Gated
  // DeltaNet layers among gated full-attention layers (HybridConfig), zero-centred norms
  kQwen3_5,
  // Qwen3_5MoeForConditionalGeneration / Qwen3_5MoeForCausalLM (Qwen3.5 and Qwen3.6 mixtures of
  // experts): Qwen3.5's layers with a sparse MLP in every layer, its experts stored fused and a
  // shared expert beside them (MoeConfig)
  kQwen3_5Moe,
};

// "qwen3", "llama", "qwen3_moe", "qwen3_5", "qwen3_5_moe": the spelling of `model_type` and of
// `make-tiny --arch`.
std::string_view ModelFamilyName(ModelFamily family);
std::optional<ModelFamily> ModelFamilyFromName(std::string_view name);

// The sparse MLP layers of a mixture-of-experts family (Qwen3-MoE, Qwen3.5-MoE): a router picks
// each row's top `experts_per_token` of `num_experts` SwiGLU experts of width
// `expert_intermediate_size`; Qwen3.5-MoE adds a shared expert every row runs, its output scaled
// by sigmoid(shared_expert_gate · x). num_experts 0: every layer is dense.
struct MoeConfig {
  int64_t num_experts = 0;               // `num_experts`
  int64_t experts_per_token = 0;         // `num_experts_per_tok`, in [1, num_experts]
  int64_t expert_intermediate_size = 0;  // `moe_intermediate_size`
  bool norm_topk_prob = false;           // renormalise the k routing weights to sum 1
  int64_t decoder_sparse_step = 1;       // `decoder_sparse_step`
  std::vector<int64_t> mlp_only_layers;  // dense whatever the step; each in [0, layers)
  int64_t shared_expert_intermediate_size = 0;  // 0: no shared expert
  // The experts stored as two tensors per layer, `mlp.experts.gate_up_proj` [experts, 2·I,
  // hidden] and `mlp.experts.down_proj` [experts, hidden, I] (Qwen3.5-MoE), not one set of
  // `mlp.experts.{e}.{gate,up,down}_proj.weight` per expert (Qwen3-MoE).
  bool fused_experts = false;

  bool operator==(const MoeConfig&) const = default;
};

// A layer's token mixer.
enum class LayerKind : uint8_t {
  kFullAttention,    // softmax attention over the paged K/V
  kLinearAttention,  // Gated DeltaNet: a causal conv and a recurrent state per request
};

// The Gated DeltaNet layers of a hybrid family (Qwen3.5): `linear_*` fields of its text config.
// Per value head h (key head h / (value_heads / key_heads)) the layer keeps a state
// [key_head_dim, value_head_dim] and the conv the last conv_kernel − 1 inputs of its channels.
struct GatedDeltaNetConfig {
  int64_t key_heads = 0;       // `linear_num_key_heads`
  int64_t value_heads = 0;     // `linear_num_value_heads`, a multiple of key_heads
  int64_t key_head_dim = 0;    // `linear_key_head_dim`
  int64_t value_head_dim = 0;  // `linear_value_head_dim`
  int64_t conv_kernel = 0;     // `linear_conv_kernel_dim`

  int64_t key_dim() const { return key_heads * key_head_dim; }
  int64_t value_dim() const { return value_heads * value_head_dim; }
  // The conv's channels: q, k and v as in_proj_qkv projects them.
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }

  bool operator==(const GatedDeltaNetConfig&) const = default;
};

// What a hybrid family (kQwen3_5) adds to the decoder; empty (every layer full attention, plain
// attention, plain norms) for the others.
struct HybridConfig {
  std::vector<LayerKind> layer_types;  // [num_hidden_layers]; empty: every layer full attention
  GatedDeltaNetConfig linear;
  // Rotary dims per head: head_dim · partial_rotary_factor (rotate-half on those only).
  double partial_rotary_factor = 1.0;
  // q_proj doubled: per head the query, then a gate applied as sigmoid to the attention output.
  bool attention_output_gate = false;
  // RMSNorm gains stored zero-centred (the norm multiplies by 1 + w): every norm but the gated
  // one inside the linear-attention layers.
  bool zero_centred_norms = false;
  // The multimodal checkpoint (…ForConditionalGeneration): text weights under
  // "model.language_model.", config fields under `text_config`; else "model." and top level.
  bool multimodal_layout = false;

  bool operator==(const HybridConfig&) const = default;
};

struct DecoderConfig {
  ModelFamily family = ModelFamily::kQwen3;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // the dense MLP's; 0 where every layer is sparse (Qwen3.5-MoE)
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;  // defaults to hidden_size / num_attention_heads when absent
  double rms_norm_eps = 1e-6;
  double rope_theta = 1e6;
  RopeScaling rope_scaling;  // kNone unless the config asks for a supported scaling
  bool qk_norm = true;       // per-head RMSNorm of q and k (the family decides; Qwen3: yes)
  bool tie_word_embeddings = false;
  int64_t max_position_embeddings = 0;
  std::vector<int64_t> bos_token_ids;  // may be empty (Qwen3 has bos null)
  std::vector<int64_t> eos_token_ids;  // `eos_token_id` may be an int or a list
  MoeConfig moe;        // kQwen3Moe, kQwen3_5Moe only; empty (all layers dense) otherwise
  HybridConfig hybrid;  // kQwen3_5, kQwen3_5Moe only; empty otherwise

  int64_t q_dim() const { return num_attention_heads * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
  // The rotation (RopeSpec::rotary_dim set only when part of each head is rotated).
  RopeSpec rope() const {
    return {.theta = rope_theta,
            .scaling = rope_scaling,
            .rotary_dim = rotary_dim() == head_dim ? 0 : rotary_dim()};
  }
  // Whether layer `layer`'s MLP is the sparse expert block (transformers' Qwen3MoeDecoderLayer):
  // not in mlp_only_layers, num_experts > 0 and (layer + 1) a multiple of decoder_sparse_step.
  // Dense layers use intermediate_size. The one statement of the rule.
  bool IsSparseLayer(int64_t layer) const;
  bool HasSparseLayers() const;
  int64_t SparseLayerCount() const;
  // Whether layer `layer` is a Gated DeltaNet layer (hybrid.layer_types); the one statement of
  // the rule.
  bool IsLinearAttentionLayer(int64_t layer) const;
  bool HasLinearAttentionLayers() const;
  // Dims per head that RoPE rotates: head_dim · partial_rotary_factor, truncated (even).
  int64_t rotary_dim() const;
  // Rows of q_proj: q_dim, doubled with an output gate.
  int64_t q_proj_rows() const { return hybrid.attention_output_gate ? 2 * q_dim() : q_dim(); }
  // Where the text model's tensors are named: "model.language_model." (multimodal layout) or
  // "model.".
  std::string TensorPrefix() const;

  bool operator==(const DecoderConfig&) const = default;
};

// The family a config is, from `architectures` (its first entry) or, without it, `model_type`:
// InvalidArgument naming the architecture (or model type) and the supported ones otherwise.
// Then that family's reader parses and validates: missing required fields, wrong types,
// non-positive sizes, heads not a multiple of kv heads, odd head_dim, token ids outside the
// vocabulary, unsupported variants: InvalidArgument naming `path` (or "config.json" when `path`
// is empty) and the field. Text that is not a JSON object: DataLoss. Optional fields given as
// null count as absent; fields the engine does not use are ignored.
Result<DecoderConfig> ParseDecoderConfig(const std::string& json_text, const std::string& path);
Result<DecoderConfig> LoadDecoderConfig(const std::string& path);
// A checkpoint folder's config: `dir`/config.json, with the EOS ids of
// `dir`/generation_config.json (when present; Llama 3.1 lists <|eot_id|> there) added after
// config.json's. Their ids are checked as config.json's are, errors naming that file.
Result<DecoderConfig> LoadCheckpointConfig(const std::string& dir);

// The JSON a Hugging Face checkpoint of config.family carries for `config`.
std::string DecoderConfigToJson(const DecoderConfig& config);

}  // namespace dscale
