#include "io/dflash_config.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "io/file_util.h"
#include "io/json_util.h"
#include "io/qwen3_config.h"

namespace dscale {
namespace {

// Where drafting fields live: in `dflash_config` when present there, else at the top level.
struct DraftingField {
  const nlohmann::json* value = nullptr;  // nullptr: absent (or null) in both places
  std::string name;                       // "dflash_config.mask_token_id" or "mask_token_id"
};

DraftingField FindField(const nlohmann::json& root, const char* name) {
  if (const nlohmann::json* nested = JsonMember(root, "dflash_config")) {
    if (const nlohmann::json* value = JsonMember(*nested, name)) {
      return {value, std::string("dflash_config.") + name};
    }
  }
  return {JsonMember(root, name), name};
}

Status FieldError(const std::string& path, const std::string& field, const std::string& problem) {
  return InvalidArgument(JsonFieldName(path, field) + ": " + problem);
}

// Layer ids are checked as the JSON numbers they are, before they are narrowed to int32: a value
// past the int32 range is an error, never wrapped onto a real layer.
Status ReadLayerIds(const DraftingField& field, const std::string& path, DFlashConfig* out) {
  const nlohmann::json& value = *field.value;
  if (!value.is_array() || value.empty()) {
    return FieldError(path, field.name,
                      "expected a non-empty list of layer ids, got " + DescribeJson(value));
  }
  for (size_t i = 0; i < value.size(); ++i) {
    DSCALE_ASSIGN_OR_RETURN(
        const int32_t id,
        ReadJsonIntAs<int32_t>(value[i],
                               JsonFieldName(path, field.name + "[" + std::to_string(i) + "]"), 0,
                               std::numeric_limits<int32_t>::max()));
    out->target_layer_ids.push_back(id);
  }
  return Status::Ok();
}

// Newer drafters' variants (dflash_config.layer_types with sliding-window or causal layers, an
// input_embedding_scale) that these draft layers do not compute: refused by name rather than
// run as full-attention layers on unscaled embeddings.
Status CheckDraftLayerVariants(const nlohmann::json& root, const std::string& path) {
  if (const DraftingField f = FindField(root, "layer_types"); f.value != nullptr) {
    const nlohmann::json& types = *f.value;
    const bool all_full =
        types.is_array() && std::all_of(types.begin(), types.end(), [](const nlohmann::json& t) {
          return t == "full_attention";
        });
    if (!all_full) {
      return FieldError(path, f.name,
                        "only \"full_attention\" draft layers are supported (no sliding-window "
                        "or causal ones), got " +
                            types.dump());
    }
  }
  if (const DraftingField f = FindField(root, "input_embedding_scale"); f.value != nullptr) {
    const Result<double> scale = ReadJsonNumber(*f.value, JsonFieldName(path, f.name));
    if (!scale.ok() || *scale != 1.0) {
      return FieldError(path, f.name,
                        "only 1 (unscaled embeddings) is supported, got " + DescribeJson(*f.value));
    }
  }
  return Status::Ok();
}

Status ReadDraftingFields(const nlohmann::json& root, const std::string& path,
                          DFlashConfig* out) {
  if (const auto it = root.find("dflash_config");
      it != root.end() && !it->is_null() && !it->is_object()) {
    return FieldError(path, "dflash_config", "expected an object, got " + DescribeJson(*it));
  }
  if (const DraftingField f = FindField(root, "block_size"); f.value != nullptr) {
    DSCALE_ASSIGN_OR_RETURN(out->block_size,
                            ReadJsonIntAs<int32_t>(*f.value, JsonFieldName(path, f.name), 2, 64));
  }
  const DraftingField mask = FindField(root, "mask_token_id");
  if (mask.value == nullptr) {
    return FieldError(path, "mask_token_id", "missing (expected a token id)");
  }
  // Bounded by the target's vocabulary in ValidateAgainstTarget.
  DSCALE_ASSIGN_OR_RETURN(out->mask_token_id,
                          ReadJsonInt(*mask.value, JsonFieldName(path, mask.name), 0,
                                      std::numeric_limits<int32_t>::max()));
  if (const DraftingField f = FindField(root, "num_target_layers"); f.value != nullptr) {
    DSCALE_ASSIGN_OR_RETURN(
        out->num_target_layers,
        ReadJsonInt(*f.value, JsonFieldName(path, f.name), 1, std::numeric_limits<int32_t>::max()));
  }
  if (const DraftingField f = FindField(root, "target_layer_ids"); f.value != nullptr) {
    DSCALE_RETURN_IF_ERROR(ReadLayerIds(f, path, out));
  }
  return CheckDraftLayerVariants(root, path);
}

Status ValidateAgainstTarget(const DFlashConfig& c, const std::string& path,
                             const DecoderConfig& target) {
  if (c.draft.hidden_size != target.hidden_size) {
    return FieldError(path, "hidden_size",
                      "drafter hidden size " + std::to_string(c.draft.hidden_size) +
                          " differs from the target's " + std::to_string(target.hidden_size));
  }
  if (c.draft.vocab_size != target.vocab_size) {
    return FieldError(path, "vocab_size",
                      "drafter vocabulary of " + std::to_string(c.draft.vocab_size) +
                          " tokens differs from the target's " +
                          std::to_string(target.vocab_size) +
                          " (the drafter reads the target's embedding and LM head)");
  }
  if (c.mask_token_id >= target.vocab_size) {
    return FieldError(path, "mask_token_id",
                      std::to_string(c.mask_token_id) + " is outside the target vocabulary [0, " +
                          std::to_string(target.vocab_size) + ")");
  }
  if (c.num_target_layers != 0 && c.num_target_layers != target.num_hidden_layers) {
    return FieldError(path, "num_target_layers",
                      std::to_string(c.num_target_layers) + " but the target has " +
                          std::to_string(target.num_hidden_layers) + " layers");
  }
  for (int32_t id : c.target_layer_ids) {
    if (id < 0 || id >= target.num_hidden_layers) {
      return FieldError(path, "target_layer_ids",
                        "layer " + std::to_string(id) + " is outside the target's " +
                            std::to_string(target.num_hidden_layers) + " layers");
    }
  }
  return Status::Ok();
}

}  // namespace

std::vector<int32_t> DeriveTargetLayerIds(int64_t num_target_layers, int64_t num_draft_layers) {
  if (num_draft_layers == 1) return {static_cast<int32_t>(num_target_layers / 2)};
  const double start = 1.0;
  const double span = static_cast<double>(num_target_layers - 3) - start;
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < num_draft_layers; ++i) {
    // nearbyint rounds half to even under the default rounding mode, as the reference does.
    const double x = start + static_cast<double>(i) * span / static_cast<double>(num_draft_layers - 1);
    ids.push_back(static_cast<int32_t>(std::nearbyint(x)));
  }
  return ids;
}

Result<DFlashConfig> ParseDFlashConfig(const std::string& json_text, const std::string& path,
                                       const DecoderConfig& target) {
  const std::string name = path.empty() ? "config.json" : path;
  Result<nlohmann::json> root = ParseJsonDocument(json_text);
  if (!root.ok()) return root.status().WithContext(name);
  if (!root->is_object()) {
    return DataLoss(name + ": the config is " + DescribeJson(*root) + ", expected a JSON object");
  }
  DFlashConfig config;
  // The draft layers are Qwen3's whatever the target; `architectures` names the drafter.
  DSCALE_RETURN_IF_ERROR(ReadDraftTransformerConfig(ConfigFieldReader(*root, name), &config.draft));
  DSCALE_RETURN_IF_ERROR(ReadDraftingFields(*root, path, &config));
  DSCALE_ASSIGN_OR_RETURN(config.domino, ParseDominoHeadConfig(*root, path));
  if (config.target_layer_ids.empty()) {
    const int64_t depth =
        config.num_target_layers > 0 ? config.num_target_layers : target.num_hidden_layers;
    config.target_layer_ids = DeriveTargetLayerIds(depth, config.draft.num_hidden_layers);
  }
  DSCALE_RETURN_IF_ERROR(ValidateAgainstTarget(config, path, target));
  return config;
}

Result<DFlashConfig> LoadDFlashConfig(const std::string& path, const DecoderConfig& target) {
  DSCALE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseDFlashConfig(text, path, target);
}

std::string DFlashConfigToJson(const DFlashConfig& c) {
  nlohmann::json j = Qwen3ConfigJson(c.draft);
  j["architectures"] = {"DFlashDraftModel"};
  j["block_size"] = c.block_size;
  j["num_target_layers"] = c.num_target_layers;
  j["dflash_config"] = {{"mask_token_id", c.mask_token_id},
                        {"target_layer_ids", c.target_layer_ids}};
  if (c.domino.has_value()) j["domino_config"] = DominoHeadConfigToJson(*c.domino);
  return j.dump(2);
}

}  // namespace dscale
