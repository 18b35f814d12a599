// Qwen3 config.json: the common decoder fields plus what Qwen3 fixes (q/k norms, no scaling);
// Qwen3-MoE: the same plus its sparse MLP layers.

#include "io/qwen3_config.h"

#include <limits>
#include <string>

#include "io/json_util.h"
#include "io/llama_config.h"

namespace dscale {
namespace {

// The layers' fields for a Qwen3 layout whose `model_type` is `model_type`; the attention layout
// (sliding windows, layer types) is checked here for a target and left to dflash_config.cc for a
// drafter.
Status ReadQwen3Layers(const ConfigFieldReader& reader, DecoderConfig* config, bool target,
                       ModelFamily family = ModelFamily::kQwen3) {
  config->family = family;
  config->qk_norm = true;
  DSCALE_RETURN_IF_ERROR(ReadDecoderFields(reader, config));
  const std::string model_type(ModelFamilyName(family));
  if (!reader.IsAbsentOr("model_type", model_type)) {
    return reader.Error("model_type",
                        "expected \"" + model_type + "\", got " + reader.Describe("model_type"));
  }
  DSCALE_RETURN_IF_ERROR(CheckDenseDecoderFeatures(reader));
  return target ? CheckFullAttentionLayers(reader) : Status::Ok();
}

Status RefuseRopeScaling(const ConfigFieldReader& reader) {
  if (reader.Get("rope_scaling") == nullptr) return Status::Ok();
  return reader.Error("rope_scaling",
                      "scaled rotary embeddings (YaRN, linear, dynamic) are "
                      "not supported; expected null, got " +
                          reader.Describe("rope_scaling"));
}

// `mlp_only_layers`: null/absent (none) or a list of layer indices in [0, layers).
Status ReadMlpOnlyLayers(const ConfigFieldReader& reader, const std::string& path, int64_t layers,
                         std::vector<int64_t>* out) {
  out->clear();
  const nlohmann::json* value = reader.Get("mlp_only_layers");
  if (value == nullptr) return Status::Ok();
  if (!value->is_array()) {
    return reader.Error("mlp_only_layers",
                        "expected a list of layer indices, got " + DescribeJson(*value));
  }
  for (size_t i = 0; i < value->size(); ++i) {
    const std::string field = "mlp_only_layers[" + std::to_string(i) + "]";
    const Result<int64_t> layer = ReadJsonInt((*value)[i], JsonFieldName(path, field), 0,
                                              std::numeric_limits<int64_t>::max());
    if (!layer.ok() || *layer >= layers) {
      return reader.Error(field, "expected a layer index in [0, " + std::to_string(layers) +
                                     "), got " + DescribeJson((*value)[i]));
    }
    out->push_back(*layer);
  }
  return Status::Ok();
}

// The sparse MLP's fields (MoeConfig), after the decoder's.
Status ReadMoeFields(const ConfigFieldReader& reader, const std::string& path,
                     DecoderConfig* config) {
  MoeConfig& m = config->moe;
  DSCALE_RETURN_IF_ERROR(ReadExpertFields(reader, &m));
  DSCALE_RETURN_IF_ERROR(reader.OptionalBool("norm_topk_prob", &m.norm_topk_prob));
  std::optional<int64_t> step;
  DSCALE_RETURN_IF_ERROR(reader.OptionalPositiveInt("decoder_sparse_step", &step));
  m.decoder_sparse_step = step.value_or(1);
  DSCALE_RETURN_IF_ERROR(
      ReadMlpOnlyLayers(reader, path, config->num_hidden_layers, &m.mlp_only_layers));
  // Qwen2-MoE's shared expert is not part of Qwen3-MoE's layer.
  if (!reader.IsAbsentOr("shared_expert_intermediate_size", 0)) {
    return reader.Error("shared_expert_intermediate_size",
                        "a shared expert is not supported, got " +
                            reader.Describe("shared_expert_intermediate_size"));
  }
  return Status::Ok();
}

}  // namespace

Status ReadQwen3Config(const ConfigFieldReader& reader, DecoderConfig* config) {
  DSCALE_RETURN_IF_ERROR(ReadQwen3Layers(reader, config, /*target=*/true));
  return RefuseRopeScaling(reader);
}

Status ReadQwen3MoeConfig(const ConfigFieldReader& reader, DecoderConfig* config) {
  DSCALE_RETURN_IF_ERROR(ReadQwen3Layers(reader, config, /*target=*/true, ModelFamily::kQwen3Moe));
  DSCALE_RETURN_IF_ERROR(RefuseRopeScaling(reader));
  return ReadMoeFields(reader, reader.path(), config);
}

Status ReadDraftTransformerConfig(const ConfigFieldReader& reader, DecoderConfig* config) {
  DSCALE_RETURN_IF_ERROR(ReadQwen3Layers(reader, config, /*target=*/false));
  return ReadRopeScaling(reader, config);
}

nlohmann::json Qwen3ConfigJson(const DecoderConfig& config) {
  nlohmann::json json = DecoderFieldsJson(config);
  json.update({
      {"architectures", nlohmann::json::array({"Qwen3ForCausalLM"})},
      {"max_window_layers", config.num_hidden_layers},
      {"model_type", "qwen3"},
      {"rope_scaling", RopeScalingJson(config.rope_scaling)},
      {"sliding_window", nullptr},
      {"use_sliding_window", false},
  });
  return json;
}

nlohmann::json Qwen3MoeConfigJson(const DecoderConfig& config) {
  const MoeConfig& m = config.moe;
  nlohmann::json json = Qwen3ConfigJson(config);
  json.update({
      {"architectures", nlohmann::json::array({"Qwen3MoeForCausalLM"})},
      {"decoder_sparse_step", m.decoder_sparse_step},
      {"mlp_only_layers", m.mlp_only_layers},
      {"model_type", "qwen3_moe"},
      {"moe_intermediate_size", m.expert_intermediate_size},
      {"norm_topk_prob", m.norm_topk_prob},
      {"num_experts", m.num_experts},
      {"num_experts_per_tok", m.experts_per_token},
      {"output_router_logits", false},
      {"router_aux_loss_coef", 0.001},
  });
  return json;
}

}  // namespace dscale
