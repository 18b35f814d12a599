// Llama 3.x config.json: the common decoder fields, no q/k norms, llama3 RoPE scaling.

#include "io/llama_config.h"

#include <string>

#include "io/json_util.h"

namespace dscale {

Status ReadRopeScaling(const ConfigFieldReader& reader, DecoderConfig* config) {
  config->rope_scaling = {};
  const nlohmann::json* value = reader.Get("rope_scaling");
  if (value == nullptr) return Status::Ok();
  if (!value->is_object()) {
    return reader.Error("rope_scaling", "expected an object or null, got " + DescribeJson(*value));
  }
  const ConfigFieldReader scaling = reader.Nested("rope_scaling");
  // HF spells the kind `rope_type`; older configs `type`.
  const char* kind_field = scaling.Get("rope_type") != nullptr ? "rope_type" : "type";
  const nlohmann::json* kind = scaling.Get(kind_field);
  if (kind == nullptr || *kind != "llama3") {
    return scaling.Error(kind_field, std::string("only \"llama3\" scaling is supported, got ") +
                                         (kind == nullptr ? "nothing" : DescribeJson(*kind)));
  }
  RopeScaling s{.type = RopeScalingType::kLlama3};
  DSCALE_RETURN_IF_ERROR(scaling.PositiveNumber("factor", &s.factor));
  DSCALE_RETURN_IF_ERROR(scaling.PositiveNumber("low_freq_factor", &s.low_freq_factor));
  DSCALE_RETURN_IF_ERROR(scaling.PositiveNumber("high_freq_factor", &s.high_freq_factor));
  DSCALE_RETURN_IF_ERROR(
      scaling.PositiveInt("original_max_position_embeddings", &s.original_max_position_embeddings));
  if (s.factor < 1.0) {
    return scaling.Error("factor", "expected at least 1, got " + scaling.Describe("factor"));
  }
  if (!(s.high_freq_factor > s.low_freq_factor)) {
    return scaling.Error("high_freq_factor", "expected more than low_freq_factor " +
                                                 scaling.Describe("low_freq_factor") + ", got " +
                                                 scaling.Describe("high_freq_factor"));
  }
  if (s.original_max_position_embeddings > config->max_position_embeddings) {
    return scaling.Error("original_max_position_embeddings",
                         std::to_string(s.original_max_position_embeddings) +
                             " is past max_position_embeddings " +
                             std::to_string(config->max_position_embeddings));
  }
  config->rope_scaling = s;
  return Status::Ok();
}

nlohmann::json RopeScalingJson(const RopeScaling& s) {
  if (s.type == RopeScalingType::kNone) return nullptr;
  return {{"factor", NumberToJson(s.factor)},
          {"high_freq_factor", NumberToJson(s.high_freq_factor)},
          {"low_freq_factor", NumberToJson(s.low_freq_factor)},
          {"original_max_position_embeddings", s.original_max_position_embeddings},
          {"rope_type", "llama3"}};
}

Status ReadLlamaConfig(const ConfigFieldReader& reader, DecoderConfig* config) {
  config->family = ModelFamily::kLlama;
  config->qk_norm = false;
  DSCALE_RETURN_IF_ERROR(ReadDecoderFields(reader, config));
  if (!reader.IsAbsentOr("model_type", "llama")) {
    return reader.Error("model_type", "expected \"llama\", got " + reader.Describe("model_type"));
  }
  if (!reader.IsAbsentOr("pretraining_tp", 1)) {
    return reader.Error("pretraining_tp", "expected 1, got " + reader.Describe("pretraining_tp"));
  }
  DSCALE_RETURN_IF_ERROR(CheckDenseDecoderFeatures(reader));
  DSCALE_RETURN_IF_ERROR(CheckFullAttentionLayers(reader));
  return ReadRopeScaling(reader, config);
}

nlohmann::json LlamaConfigJson(const DecoderConfig& config) {
  nlohmann::json json = DecoderFieldsJson(config);
  json.update({
      {"architectures", nlohmann::json::array({"LlamaForCausalLM"})},
      {"mlp_bias", false},
      {"model_type", "llama"},
      {"pretraining_tp", 1},
      {"rope_scaling", RopeScalingJson(config.rope_scaling)},
  });
  return json;
}

}  // namespace dscale
