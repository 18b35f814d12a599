// Qwen3 config.json: the common decoder fields plus what Qwen3 fixes (q/k norms, no scaling).

#include "io/qwen3_config.h"

#include "io/llama_config.h"

namespace dscale {
namespace {

// The layers' fields; the attention layout (sliding windows, layer types) is checked here for a
// target and left to dflash_config.cc for a drafter.
Status ReadQwen3Layers(const ConfigFieldReader& reader, DecoderConfig* config, bool target) {
  config->family = ModelFamily::kQwen3;
  config->qk_norm = true;
  DSCALE_RETURN_IF_ERROR(ReadDecoderFields(reader, config));
  if (!reader.IsAbsentOr("model_type", "qwen3")) {
    return reader.Error("model_type", "expected \"qwen3\", got " + reader.Describe("model_type"));
  }
  DSCALE_RETURN_IF_ERROR(CheckDenseDecoderFeatures(reader));
  return target ? CheckFullAttentionLayers(reader) : Status::Ok();
}

}  // namespace

Status ReadQwen3Config(const ConfigFieldReader& reader, DecoderConfig* config) {
  DSCALE_RETURN_IF_ERROR(ReadQwen3Layers(reader, config, /*target=*/true));
  if (reader.Get("rope_scaling") != nullptr) {
    return reader.Error("rope_scaling",
                        "scaled rotary embeddings (YaRN, linear, dynamic) are "
                        "not supported; expected null, got " +
                            reader.Describe("rope_scaling"));
  }
  return Status::Ok();
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

}  // namespace dscale
