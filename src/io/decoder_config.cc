// config.json → DecoderConfig: the family from `architectures` / `model_type`, then its reader.

#include "io/decoder_config.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/config_fields.h"
#include "io/file_util.h"
#include "io/json_util.h"
#include "io/llama_config.h"
#include "io/qwen3_5_config.h"
#include "io/qwen3_config.h"

namespace dscale {
namespace {

struct FamilyNames {
  ModelFamily family;
  const char* model_type;
  const char* architecture;
  bool multimodal = false;  // the text model inside a …ForConditionalGeneration
};
// A family's first row names it (ModelFamilyName).
constexpr FamilyNames kFamilies[] = {
    {ModelFamily::kQwen3, "qwen3", "Qwen3ForCausalLM"},
    {ModelFamily::kLlama, "llama", "LlamaForCausalLM"},
    {ModelFamily::kQwen3Moe, "qwen3_moe", "Qwen3MoeForCausalLM"},
    {ModelFamily::kQwen3_5, "qwen3_5", "Qwen3_5ForConditionalGeneration", true},
    {ModelFamily::kQwen3_5, "qwen3_5_text", "Qwen3_5ForCausalLM"},
    {ModelFamily::kQwen3_5Moe, "qwen3_5_moe", "Qwen3_5MoeForConditionalGeneration", true},
    {ModelFamily::kQwen3_5Moe, "qwen3_5_moe_text", "Qwen3_5MoeForCausalLM"},
};
constexpr FamilyNames kDefaultFamily = kFamilies[0];

std::string SupportedList(bool architectures) {
  std::string list;
  for (const FamilyNames& f : kFamilies) {
    if (!list.empty()) list += ", ";
    list += std::string("\"") + (architectures ? f.architecture : f.model_type) + "\"";
  }
  return list;
}

// The family `architectures[0]` names, else the one `model_type` names; a config that names
// neither is Qwen3's (the configs this engine has always read).
Result<FamilyNames> FamilyOf(const ConfigFieldReader& reader) {
  if (const nlohmann::json* archs = reader.Get("architectures"); archs != nullptr) {
    if (!archs->is_array() || archs->empty() || !(*archs)[0].is_string()) {
      return reader.Error("architectures",
                          "expected a list of architecture names, got " + DescribeJson(*archs));
    }
    for (const FamilyNames& f : kFamilies) {
      if ((*archs)[0] == f.architecture) return f;
    }
    return reader.Error("architectures",
                        "architecture " + DescribeJson((*archs)[0]) +
                            " is not supported (supported: " + SupportedList(true) + ")");
  }
  if (const nlohmann::json* type = reader.Get("model_type"); type != nullptr) {
    for (const FamilyNames& f : kFamilies) {
      if (*type == f.model_type) return f;
    }
    return reader.Error("model_type", "model type " + DescribeJson(*type) +
                                          " is not supported (supported: " + SupportedList(false) +
                                          ")");
  }
  return kDefaultFamily;
}

}  // namespace

std::string_view ModelFamilyName(ModelFamily family) {
  for (const FamilyNames& f : kFamilies) {
    if (f.family == family) return f.model_type;
  }
  return "unknown";
}

std::optional<ModelFamily> ModelFamilyFromName(std::string_view name) {
  for (const FamilyNames& f : kFamilies) {
    if (name == f.model_type) return f.family;
  }
  return std::nullopt;
}

Result<DecoderConfig> ParseDecoderConfig(const std::string& json_text, const std::string& path) {
  const std::string name = path.empty() ? "config.json" : path;
  Result<nlohmann::json> root = ParseJsonDocument(json_text);
  if (!root.ok()) return root.status().WithContext(name);
  if (!root->is_object()) {
    return DataLoss(name + ": the config is " + DescribeJson(*root) + ", expected a JSON object");
  }
  const ConfigFieldReader reader(*root, name);
  DSCALE_ASSIGN_OR_RETURN(const FamilyNames family, FamilyOf(reader));
  DecoderConfig config;
  switch (family.family) {
    case ModelFamily::kQwen3:
      DSCALE_RETURN_IF_ERROR(ReadQwen3Config(reader, &config));
      break;
    case ModelFamily::kLlama:
      DSCALE_RETURN_IF_ERROR(ReadLlamaConfig(reader, &config));
      break;
    case ModelFamily::kQwen3Moe:
      DSCALE_RETURN_IF_ERROR(ReadQwen3MoeConfig(reader, &config));
      break;
    case ModelFamily::kQwen3_5:
    case ModelFamily::kQwen3_5Moe:
      DSCALE_RETURN_IF_ERROR(ReadQwen3_5Config(reader, family.multimodal,
                                               family.family == ModelFamily::kQwen3_5Moe, &config));
      break;
  }
  return config;
}

Result<DecoderConfig> LoadDecoderConfig(const std::string& path) {
  DSCALE_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path));
  return ParseDecoderConfig(text, path);
}

Result<DecoderConfig> LoadCheckpointConfig(const std::string& dir) {
  DSCALE_ASSIGN_OR_RETURN(DecoderConfig config, LoadDecoderConfig(dir + "/config.json"));
  const std::string path = dir + "/generation_config.json";
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return config;
  DSCALE_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path));
  Result<nlohmann::json> root = ParseJsonDocument(text);
  if (!root.ok()) return root.status().WithContext(path);
  if (!root->is_object()) {
    return DataLoss(path + ": expected a JSON object, got " + DescribeJson(*root));
  }
  std::vector<int64_t> eos;
  DSCALE_RETURN_IF_ERROR(
      ConfigFieldReader(*root, path).OptionalTokenIds("eos_token_id", config.vocab_size, &eos));
  for (const int64_t id : eos) {
    if (std::find(config.eos_token_ids.begin(), config.eos_token_ids.end(), id) ==
        config.eos_token_ids.end()) {
      config.eos_token_ids.push_back(id);
    }
  }
  return config;
}

bool DecoderConfig::IsSparseLayer(int64_t layer) const {
  const std::vector<int64_t>& dense = moe.mlp_only_layers;
  return moe.num_experts > 0 && std::find(dense.begin(), dense.end(), layer) == dense.end() &&
         (layer + 1) % moe.decoder_sparse_step == 0;
}

bool DecoderConfig::IsLinearAttentionLayer(int64_t layer) const {
  const std::vector<LayerKind>& types = hybrid.layer_types;
  return layer >= 0 && layer < static_cast<int64_t>(types.size()) &&
         types[static_cast<size_t>(layer)] == LayerKind::kLinearAttention;
}

bool DecoderConfig::HasLinearAttentionLayers() const {
  return std::find(hybrid.layer_types.begin(), hybrid.layer_types.end(),
                   LayerKind::kLinearAttention) != hybrid.layer_types.end();
}

int64_t DecoderConfig::rotary_dim() const {
  return static_cast<int64_t>(static_cast<double>(head_dim) * hybrid.partial_rotary_factor);
}

std::string DecoderConfig::TensorPrefix() const {
  return hybrid.multimodal_layout ? "model.language_model." : "model.";
}

bool DecoderConfig::HasSparseLayers() const {
  for (int64_t layer = 0; layer < num_hidden_layers; ++layer) {
    if (IsSparseLayer(layer)) return true;
  }
  return false;
}

int64_t DecoderConfig::SparseLayerCount() const {
  int64_t count = 0;
  for (int64_t layer = 0; layer < num_hidden_layers; ++layer) count += IsSparseLayer(layer);
  return count;
}

std::string DecoderConfigToJson(const DecoderConfig& config) {
  nlohmann::json json;
  switch (config.family) {
    case ModelFamily::kQwen3:
      json = Qwen3ConfigJson(config);
      break;
    case ModelFamily::kLlama:
      json = LlamaConfigJson(config);
      break;
    case ModelFamily::kQwen3Moe:
      json = Qwen3MoeConfigJson(config);
      break;
    case ModelFamily::kQwen3_5:
    case ModelFamily::kQwen3_5Moe:
      json = Qwen3_5ConfigJson(config);
      break;
  }
  return json.dump(2) + "\n";
}

}  // namespace dscale
