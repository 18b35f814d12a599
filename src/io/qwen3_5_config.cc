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
  if (!reader.IsAbsentOr("num_experts", 0)) {
    return reader.Error("num_experts", "the Qwen3.5 mixture of experts is not supported, got " +
                                           reader.Describe("num_experts"));
  }
  return Status::Ok();
}

// The text model's fields (the whole config, or its `text_config`).
Status ReadTextConfig(const ConfigFieldReader& t, DecoderConfig* config) {
  int64_t head_dim = 0;
  DSCALE_RETURN_IF_ERROR(t.PositiveInt("head_dim", &head_dim));
  DSCALE_RETURN_IF_ERROR(ReadDecoderFields(t, config, /*read_rope_theta=*/false));
  if (!t.IsAbsentOr("model_type", "qwen3_5_text")) {
    return t.Error("model_type", "expected \"qwen3_5_text\", got " + t.Describe("model_type"));
  }
  DSCALE_RETURN_IF_ERROR(CheckHybridFeatures(t));
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
  json.update({
      {"architectures", nlohmann::json::array({"Qwen3_5ForCausalLM"})},
      {"attn_output_gate", true},
      {"layer_types", types},
      {"linear_conv_kernel_dim", l.conv_kernel},
      {"linear_key_head_dim", l.key_head_dim},
      {"linear_num_key_heads", l.key_heads},
      {"linear_num_value_heads", l.value_heads},
      {"linear_value_head_dim", l.value_head_dim},
      {"model_type", "qwen3_5_text"},
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

Status ReadQwen3_5Config(const ConfigFieldReader& reader, bool multimodal, DecoderConfig* config) {
  config->family = ModelFamily::kQwen3_5;
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
      {"architectures", nlohmann::json::array({"Qwen3_5ForConditionalGeneration"})},
      {"model_type", "qwen3_5"},
      {"text_config", text},
      {"tie_word_embeddings", config.tie_word_embeddings},
  };
}

}  // namespace dscale
