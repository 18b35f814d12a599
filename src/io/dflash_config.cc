#include "io/dflash_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "io/file_util.h"
#include "io/json_util.h"

namespace dscale {
namespace {

// The field in `dflash_config` when present there, else at the top level; nullptr if neither.
const nlohmann::json* FindField(const nlohmann::json& root, const char* name) {
  const auto nested = root.find("dflash_config");
  if (nested != root.end() && nested->is_object()) {
    const auto it = nested->find(name);
    if (it != nested->end() && !it->is_null()) return &*it;
  }
  const auto it = root.find(name);
  if (it != root.end() && !it->is_null()) return &*it;
  return nullptr;
}

Status FieldError(const std::string& path, const char* field, const std::string& problem) {
  return InvalidArgument(path + ": field \"" + field + "\": " + problem);
}

Status ReadLayerIds(const nlohmann::json& value, const std::string& path, DFlashConfig* out) {
  if (!value.is_array() || value.empty()) {
    return FieldError(path, "target_layer_ids",
                      "expected a non-empty list of layer ids, got " + DescribeJson(value));
  }
  for (const nlohmann::json& item : value) {
    const std::optional<int64_t> id = JsonInt64(item);
    if (!id || *id < 0) {
      return FieldError(path, "target_layer_ids",
                        "expected non-negative integers, got " + DescribeJson(item));
    }
    out->target_layer_ids.push_back(static_cast<int32_t>(*id));
  }
  return Status::Ok();
}

Status ReadDraftingFields(const nlohmann::json& root, const std::string& path,
                          DFlashConfig* out) {
  if (const nlohmann::json* v = FindField(root, "block_size")) {
    const std::optional<int64_t> size = JsonInt64(*v);
    if (!size || *size < 2 || *size > 64) {
      return FieldError(path, "block_size", "expected an integer in [2, 64], got " + DescribeJson(*v));
    }
    out->block_size = static_cast<int32_t>(*size);
  }
  const nlohmann::json* mask = FindField(root, "mask_token_id");
  if (mask == nullptr) return FieldError(path, "mask_token_id", "missing (expected a token id)");
  const std::optional<int64_t> mask_id = JsonInt64(*mask);
  if (!mask_id || *mask_id < 0) {
    return FieldError(path, "mask_token_id", "expected a token id, got " + DescribeJson(*mask));
  }
  out->mask_token_id = *mask_id;
  if (const nlohmann::json* v = FindField(root, "num_target_layers")) {
    const std::optional<int64_t> n = JsonInt64(*v);
    if (!n || *n <= 0) {
      return FieldError(path, "num_target_layers", "expected a positive integer, got " + DescribeJson(*v));
    }
    out->num_target_layers = *n;
  }
  if (const nlohmann::json* v = FindField(root, "target_layer_ids")) {
    DSCALE_RETURN_IF_ERROR(ReadLayerIds(*v, path, out));
  }
  return Status::Ok();
}

Status ValidateAgainstTarget(const DFlashConfig& c, const std::string& path,
                             const Qwen3Config& target) {
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
    if (id >= target.num_hidden_layers) {
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
                                       const Qwen3Config& target) {
  DFlashConfig config;
  DSCALE_ASSIGN_OR_RETURN(config.draft, ParseQwen3Config(json_text, path));
  const std::optional<nlohmann::json> root = ParseJson(json_text);
  DSCALE_CHECK(root.has_value());  // ParseQwen3Config accepted it
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

Result<DFlashConfig> LoadDFlashConfig(const std::string& path, const Qwen3Config& target) {
  DSCALE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseDFlashConfig(text, path, target);
}

std::string DFlashConfigToJson(const DFlashConfig& c) {
  nlohmann::json j = nlohmann::json::parse(Qwen3ConfigToJson(c.draft));
  j["architectures"] = {"DFlashDraftModel"};
  j["block_size"] = c.block_size;
  j["num_target_layers"] = c.num_target_layers;
  j["dflash_config"] = {{"mask_token_id", c.mask_token_id},
                        {"target_layer_ids", c.target_layer_ids}};
  if (c.domino.has_value()) j["domino_config"] = DominoHeadConfigToJson(*c.domino);
  return j.dump(2);
}

}  // namespace dscale
