// Qwen3.5 / Qwen3.6 (dense) config.json: the decoder's fields, the hybrid layout, the Gated
// DeltaNet sizes and the partial rotary embedding (qwen3_5_config.h states what is read).

#include "io/qwen3_5_config.h"

#include <cmath>
#include <string>

#include "io/json_util.h"

namespace dscale {
namespace {

constexpr int64_t kDefaultFullAttentionInterval = 4;  // Qwen3NextConfig's default

// `layer_types`, else `full_attention_interval`.
Status ReadLayerTypes(const ConfigFieldReader& reader, int64_t layers,
                      std::vector<LayerKind>* out) {
  out->clear();
  if (const nlohmann::json* types = reader.Get("layer_types"); types != nullptr) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != layers) {
      return reader.Error("layer_types", "expected a list of " + std::to_string(layers) +
                                             " layer types (num_hidden_layers), got " +
                                             DescribeJson(*types));
    }
    for (size_t i = 0; i < types->size(); ++i) {
      const nlohmann::json& t = (*types)[i];
      if (t == "full_attention") {
        out->push_back(LayerKind::kFullAttention);
      } else if (t == "linear_attention") {
        out->push_back(LayerKind::kLinearAttention);
      } else {
        return reader.Error(
            "layer_types[" + std::to_string(i) + "]",
            "expected \"full_attention\" or \"linear_attention\", got " + DescribeJson(t));
      }
    }
    return Status::Ok();
  }
  std::optional<int64_t> interval;
  DSCALE_RETURN_IF_ERROR(reader.OptionalPositiveInt("full_attention_interval", &interval));
  *out = IntervalLayerTypes(layers, interval.value_or(kDefaultFullAttentionInterval));
  return Status::Ok();
}

Status ReadLinearFields(const ConfigFieldReader& reader, GatedDeltaNetConfig* l) {
  DSCALE_RETURN_IF_ERROR(reader.PositiveInt("linear_num_key_heads", &l->key_heads));
  DSCALE_RETURN_IF_ERROR(reader.PositiveInt("linear_num_value_heads", &l->value_heads));
  DSCALE_RETURN_IF_ERROR(reader.PositiveInt("linear_key_head_dim", &l->key_head_dim));
  DSCALE_RETURN_IF_ERROR(reader.PositiveInt("linear_value_head_dim", &l->value_head_dim));
  DSCALE_RETURN_IF_ERROR(reader.PositiveInt("linear_conv_kernel_dim", &l->conv_kernel));
  if (l->value_heads % l->key_heads != 0) {
    return reader.Error("linear_num_value_heads",
                        std::to_string(l->value_heads) +
                            " is not a multiple of linear_num_key_heads " +
                            std::to_string(l->key_heads));
  }
  return Status::Ok();
}

// A factor in (0, 1] whose rotary dim (head_dim · factor, truncated) is even and positive.
Status ReadPartialRotary(const ConfigFieldReader& reader, DecoderConfig* config) {
  const nlohmann::json* value = reader.Get("partial_rotary_factor");
  if (value == nullptr) return Status::Ok();
  const Result<double> factor = ReadJsonNumber(*value, "partial_rotary_factor", 0.0, 1.0);
  if (!factor.ok() || !(*factor > 0)) {
    return reader.Error("partial_rotary_factor",
                        "expected a number in (0, 1], got " + DescribeJson(*value));
  }
  config->hybrid.partial_rotary_factor = *factor;
  const int64_t dims = config->rotary_dim();
  if (dims == 0 || dims % 2 != 0) {
    return reader.Error("partial_rotary_factor", DescribeJson(*value) + " of head_dim " +
                                                     std::to_string(config->head_dim) +
                                                     " rotates " + std::to_string(dims) +
                                                     " dims; expected an even, positive count");
  }
  return Status::Ok();
}

// θ and the partial rotary factor: from `rope_parameters` when present, else the top level.
Status ReadRope(const ConfigFieldReader& reader, DecoderConfig* config) {
  config->rope_scaling = {};
  if (reader.Get("rope_parameters") == nullptr) {
    if (reader.Get("rope_scaling") != nullptr) {
      return reader.Error("rope_scaling", "scaled rotary embeddings are not supported, got " +
                                              reader.Describe("rope_scaling"));
    }
    DSCALE_RETURN_IF_ERROR(reader.PositiveNumber("rope_theta", &config->rope_theta));
    return ReadPartialRotary(reader, config);
  }
  if (!reader.Get("rope_parameters")->is_object()) {
    return reader.Error("rope_parameters",
                        "expected an object, got " + reader.Describe("rope_parameters"));
  }
  const ConfigFieldReader rope = reader.Nested("rope_parameters");
  if (!rope.IsAbsentOr("rope_type", "default")) {
    return rope.Error("rope_type",
                      "only \"default\" (unscaled) rotary embeddings are supported, got " +
                          rope.Describe("rope_type"));
  }
  DSCALE_RETURN_IF_ERROR(rope.PositiveNumber("rope_theta", &config->rope_theta));
  return ReadPartialRotary(rope, config);
}

Status CheckHybridFeatures(const ConfigFieldReader& reader) {
  DSCALE_RETURN_IF_ERROR(CheckDenseDecoderFeatures(reader));
  if (!reader.IsAbsentOr("use_sliding_window", false)) {
    return reader.Error("use_sliding_window", "sliding-window attention is not supported, got " +
                                                  reader.Describe("use_sliding_window"));
  }
  if (!reader.IsAbsentOr("attn_output_gate", true)) {
    return reader.Error("attn_output_gate",
                        "this family's attention always gates its output; expected true, got " +
                            reader.Describe("attn_output_gate"));
  }
  return Status::Ok();
}

// Qwen3.5-MoE's experts: every layer sparse, the top k always renormalised, the experts fused,
// a shared expert of `shared_expert_intermediate_size`. Fields the family fixes must be absent
// or say what it does.
Status ReadSparseMlp(const ConfigFieldReader& reader, MoeConfig* moe) {
  DSCALE_RETURN_IF_ERROR(ReadExpertFields(reader, moe));
  DSCALE_RETURN_IF_ERROR(
      reader.PositiveInt("shared_expert_intermediate_size", &moe->shared_expert_intermediate_size));
  moe->norm_topk_prob = true;
  moe->fused_experts = true;
  if (!reader.IsAbsentOr("norm_topk_prob", true)) {
    return reader.Error("norm_topk_prob",
                        "this family always renormalises its top-k weights; expected true, got " +
                            reader.Describe("norm_topk_prob"));
  }
  if (!reader.IsAbsentOr("decoder_sparse_step", 1)) {
    return reader.Error("decoder_sparse_step",
                        "every layer of this family is sparse; expected 1, got " +
                            reader.Describe("decoder_sparse_step"));
  }
  if (const nlohmann::json* dense = reader.Get("mlp_only_layers");
      dense != nullptr && !(dense->is_array() && dense->empty())) {
    return reader.Error(
        "mlp_only_layers",
        "every layer of this family is sparse; expected [], got " + DescribeJson(*dense));
  }
  return Status::Ok();
}

bool IsMoe(const DecoderConfig& config) { return config.family == ModelFamily::kQwen3_5Moe; }

// The text model's `model_type`.
const char* TextModelType(const DecoderConfig& config) {
  return IsMoe(config) ? "qwen3_5_moe_text" : "qwen3_5_text";
}

// The text model's fields (the whole config, or its `text_config`).
Status ReadTextConfig(const ConfigFieldReader& t, DecoderConfig* config) {
  int64_t head_dim = 0;
  DSCALE_RETURN_IF_ERROR(t.PositiveInt("head_dim", &head_dim));
  DSCALE_RETURN_IF_ERROR(
      ReadDecoderFields(t, config, /*read_rope_theta=*/false, /*dense_mlp=*/!IsMoe(*config)));
  const std::string model_type = TextModelType(*config);
  if (!t.IsAbsentOr("model_type", model_type)) {
    return t.Error("model_type",
                   "expected \"" + model_type + "\", got " + t.Describe("model_type"));
  }
  DSCALE_RETURN_IF_ERROR(CheckHybridFeatures(t));
  if (IsMoe(*config)) {
    DSCALE_RETURN_IF_ERROR(ReadSparseMlp(t, &config->moe));
  } else if (!t.IsAbsentOr("num_experts", 0)) {
    return t.Error("num_experts",
                   "a dense Qwen3.5 has no mixture of experts (Qwen3_5Moe… has), got " +
                       t.Describe("num_experts"));
  }
  DSCALE_RETURN_IF_ERROR(ReadRope(t, config));
  DSCALE_RETURN_IF_ERROR(ReadLayerTypes(t, config->num_hidden_layers, &config->hybrid.layer_types));
  return ReadLinearFields(t, &config->hybrid.linear);
}

nlohmann::json TextConfigJson(const DecoderConfig& config) {
  const HybridConfig& h = config.hybrid;
  const GatedDeltaNetConfig& l = h.linear;
  nlohmann::json json = DecoderFieldsJson(config);
  json.erase("rope_theta");
  nlohmann::json types = nlohmann::json::array();
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    types.push_back(config.IsLinearAttentionLayer(i) ? "linear_attention" : "full_attention");
  }
  if (IsMoe(config)) {
    const MoeConfig& m = config.moe;
    json.erase("intermediate_size");
    json.update({
        {"moe_intermediate_size", m.expert_intermediate_size},
        {"num_experts", m.num_experts},
        {"num_experts_per_tok", m.experts_per_token},
        {"shared_expert_intermediate_size", m.shared_expert_intermediate_size},
    });
  }
  json.update({
      {"architectures",
       nlohmann::json::array({IsMoe(config) ? "Qwen3_5MoeForCausalLM" : "Qwen3_5ForCausalLM"})},
      {"attn_output_gate", true},
      {"layer_types", types},
      {"linear_conv_kernel_dim", l.conv_kernel},
      {"linear_key_head_dim", l.key_head_dim},
      {"linear_num_key_heads", l.key_heads},
      {"linear_num_value_heads", l.value_heads},
      {"linear_value_head_dim", l.value_head_dim},
      {"model_type", TextModelType(config)},
      {"rope_parameters",
       {{"rope_type", "default"},
        {"rope_theta", NumberToJson(config.rope_theta)},
        {"partial_rotary_factor", h.partial_rotary_factor}}},
  });
  return json;
}

}  // namespace

std::vector<LayerKind> IntervalLayerTypes(int64_t layers, int64_t every) {
  std::vector<LayerKind> types;
  for (int64_t i = 0; i < layers; ++i) {
    types.push_back((i + 1) % every == 0 ? LayerKind::kFullAttention : LayerKind::kLinearAttention);
  }
  return types;
}

Status ReadQwen3_5Config(const ConfigFieldReader& reader, bool multimodal, bool moe,
                         DecoderConfig* config) {
  config->family = moe ? ModelFamily::kQwen3_5Moe : ModelFamily::kQwen3_5;
  config->qk_norm = true;
  config->hybrid = {
      .attention_output_gate = true, .zero_centred_norms = true, .multimodal_layout = multimodal};
  if (!multimodal) return ReadTextConfig(reader, config);
  const nlohmann::json* text = reader.Get("text_config");
  if (text == nullptr || !text->is_object()) {
    return reader.Error("text_config", text == nullptr
                                           ? "missing (expected the text model's config object)"
                                           : "expected an object, got " + DescribeJson(*text));
  }
  DSCALE_RETURN_IF_ERROR(ReadTextConfig(reader.Nested("text_config"), config));
  // Qwen3_5Config's own tie_word_embeddings is the one the model ties by; it must not contradict
  // the text config's.
  if (const nlohmann::json* tie = reader.Get("tie_word_embeddings"); tie != nullptr) {
    const bool text_tie = config->tie_word_embeddings;
    DSCALE_RETURN_IF_ERROR(
        reader.OptionalBool("tie_word_embeddings", &config->tie_word_embeddings));
    if (text->contains("tie_word_embeddings") && config->tie_word_embeddings != text_tie) {
      return reader.Error("tie_word_embeddings",
                          DescribeJson(*tie) + " contradicts text_config.tie_word_embeddings");
    }
  }
  return Status::Ok();
}

nlohmann::json Qwen3_5ConfigJson(const DecoderConfig& config) {
  nlohmann::json text = TextConfigJson(config);
  if (!config.hybrid.multimodal_layout) return text;
  text.erase("architectures");
  return {
      {"architectures", nlohmann::json::array({IsMoe(config) ? "Qwen3_5MoeForConditionalGeneration"
                                                             : "Qwen3_5ForConditionalGeneration"})},
      {"model_type", IsMoe(config) ? "qwen3_5_moe" : "qwen3_5"},
      {"text_config", text},
      {"tie_word_embeddings", config.tie_word_embeddings},
  };
}

}  // namespace dscale
