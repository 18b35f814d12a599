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

// An optional bool among the drafting fields.
Result<std::optional<bool>> ReadOptionalBool(const nlohmann::json& root, const std::string& path,
                                             const char* name) {
  const DraftingField f = FindField(root, name);
  if (f.value == nullptr) return std::optional<bool>();
  DSCALE_ASSIGN_OR_RETURN(const bool value, ReadJsonBool(*f.value, JsonFieldName(path, f.name)));
  return std::optional<bool>(value);
}

// Newer drafters' attention layout and embedding scale (dflash_config.h), read as HF's Qwen3
// config and z-lab's drafter read them.
Status ReadDraftLayerLayout(const nlohmann::json& root, const std::string& path,
                            DFlashConfig* out) {
  const int64_t layers = out->draft.num_hidden_layers;
  DSCALE_ASSIGN_OR_RETURN(const std::optional<bool> use_window,
                          ReadOptionalBool(root, path, "use_sliding_window"));
  int32_t window = 0;
  if (const DraftingField f = FindField(root, "sliding_window"); f.value != nullptr) {
    DSCALE_ASSIGN_OR_RETURN(window,
                            ReadJsonIntAs<int32_t>(*f.value, JsonFieldName(path, f.name), 1));
  }
  // HF sets the window aside unless use_sliding_window is true.
  out->sliding_window = use_window.value_or(false) ? window : 0;
  out->layer_types.clear();
  if (const DraftingField f = FindField(root, "layer_types"); f.value != nullptr) {
    const nlohmann::json& types = *f.value;
    if (!types.is_array() || static_cast<int64_t>(types.size()) != layers) {
      return FieldError(path, f.name,
                        "expected one entry per draft layer (" + std::to_string(layers) +
                            "), got " + DescribeJson(types));
    }
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] == "full_attention") {
        out->layer_types.push_back(DraftLayerType::kFull);
      } else if (types[i] == "sliding_attention") {
        out->layer_types.push_back(DraftLayerType::kSliding);
      } else {
        return FieldError(
            path, f.name + "[" + std::to_string(i) + "]",
            "expected \"full_attention\" or \"sliding_attention\", got " + DescribeJson(types[i]));
      }
    }
  } else if (out->sliding_window > 0) {
    // HF's default: sliding from layer max_window_layers on.
    int64_t first_sliding = layers;
    if (const DraftingField m = FindField(root, "max_window_layers"); m.value != nullptr) {
      DSCALE_ASSIGN_OR_RETURN(first_sliding, ReadJsonInt(*m.value, JsonFieldName(path, m.name), 0,
                                                         std::numeric_limits<int32_t>::max()));
    }
    for (int64_t i = 0; i < layers; ++i) {
      out->layer_types.push_back(i >= first_sliding ? DraftLayerType::kSliding
                                                    : DraftLayerType::kFull);
    }
  }
  DSCALE_ASSIGN_OR_RETURN(out->is_causal, ReadOptionalBool(root, path, "is_causal"));
  if (const DraftingField f = FindField(root, "input_embedding_scale"); f.value != nullptr) {
    DSCALE_ASSIGN_OR_RETURN(out->input_embedding_scale,
                            ReadJsonNumber(*f.value, JsonFieldName(path, f.name)));
    if (!(out->input_embedding_scale > 0.0)) {
      return FieldError(path, f.name, "expected a positive scale, got " + DescribeJson(*f.value));
    }
  }
  return Status::Ok();
}

Status ReadDraftingFields(const nlohmann::json& root, const std::string& path, DFlashConfig* out) {
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
  return ReadDraftLayerLayout(root, path, out);
}

// Which reader a config goes to, by architectures[0]; a config without `architectures` is z-lab's
// (every drafter this engine read before DSpark).
enum class DrafterLayout { kDFlash, kDSpark };

Result<DrafterLayout> LayoutOf(const nlohmann::json& root, const std::string& path) {
  const nlohmann::json* archs = JsonMember(root, "architectures");
  if (archs == nullptr) return DrafterLayout::kDFlash;
  if (!archs->is_array() || archs->empty() || !(*archs)[0].is_string()) {
    return FieldError(path, "architectures",
                      "expected a list of architecture names, got " + DescribeJson(*archs));
  }
  if ((*archs)[0] == kDFlashArchitecture) return DrafterLayout::kDFlash;
  if ((*archs)[0] == kDSparkArchitecture) return DrafterLayout::kDSpark;
  return FieldError(path, "architectures",
                    "drafter architecture " + DescribeJson((*archs)[0]) +
                        " is not supported (supported: \"" + kDFlashArchitecture + "\", \"" +
                        kDSparkArchitecture + "\")");
}

// A drafting field DeepSpec's Qwen3DSparkModel reads from the top level of its config.
Result<DraftingField> RequiredTopLevel(const nlohmann::json& root, const std::string& path,
                                       const char* name, const char* expected) {
  const nlohmann::json* value = JsonMember(root, name);
  if (value == nullptr) {
    return FieldError(path, name, std::string("missing (expected ") + expected + ")");
  }
  return DraftingField{value, name};
}

// What a Qwen3DSparkModel layer is: non-causal attention over all of its context and block (the
// drafting pass passes is_causal=False whatever the config says), no embedding scale. A sliding
// window is refused: DeepSpec's attention passes it to a kernel that may or may not apply it.
Status CheckDSparkLayers(const std::string& path, DFlashConfig* out) {
  for (int64_t layer = 0; layer < out->draft.num_hidden_layers; ++layer) {
    if (out->LayerAttention(layer).window == 0) continue;
    return FieldError(path, "layer_types[" + std::to_string(layer) + "]",
                      "draft layer " + std::to_string(layer) +
                          " is sliding-window; a Qwen3DSparkModel layer attends over all of its "
                          "context and block (\"full_attention\")");
  }
  out->is_causal.reset();
  if (out->input_embedding_scale != 1.0) {
    return FieldError(path, "input_embedding_scale",
                      "Qwen3DSparkModel does not scale its block's embeddings");
  }
  return Status::Ok();
}

// DeepSpec's layout (Qwen3DSparkModel, io/dflash_config.h): the drafting fields at the top level,
// required as its constructor requires them, then the heads (io/dspark_config.h).
Status ReadDSparkLayout(const nlohmann::json& root, const std::string& path, DFlashConfig* out) {
  for (const char* foreign : {"dflash_config", "domino_config"}) {
    if (JsonMember(root, foreign) != nullptr) {
      return FieldError(path, foreign,
                        std::string("not part of a ") + kDSparkArchitecture +
                            " config (its fields sit at the top level; no Domino head)");
    }
  }
  // W = block_size + 1 rows are verified: at most 64, as for DFlash.
  DSCALE_ASSIGN_OR_RETURN(const DraftingField block,
                          RequiredTopLevel(root, path, "block_size", "the rows drafted, 1 to 63"));
  DSCALE_ASSIGN_OR_RETURN(
      out->block_size,
      ReadJsonIntAs<int32_t>(*block.value, JsonFieldName(path, block.name), 1, 63));
  DSCALE_ASSIGN_OR_RETURN(const DraftingField mask,
                          RequiredTopLevel(root, path, "mask_token_id", "a token id"));
  DSCALE_ASSIGN_OR_RETURN(out->mask_token_id,
                          ReadJsonInt(*mask.value, JsonFieldName(path, mask.name), 0,
                                      std::numeric_limits<int32_t>::max()));
  DSCALE_ASSIGN_OR_RETURN(const DraftingField ids,
                          RequiredTopLevel(root, path, "target_layer_ids", "a list of layer ids"));
  DSCALE_RETURN_IF_ERROR(ReadLayerIds(ids, path, out));
  if (const nlohmann::json* n = JsonMember(root, "num_target_layers"); n != nullptr) {
    DSCALE_ASSIGN_OR_RETURN(out->num_target_layers,
                            ReadJsonInt(*n, JsonFieldName(path, "num_target_layers"), 1,
                                        std::numeric_limits<int32_t>::max()));
  }
  DSCALE_RETURN_IF_ERROR(ReadDraftLayerLayout(root, path, out));
  DSCALE_RETURN_IF_ERROR(CheckDSparkLayers(path, out));
  DSCALE_ASSIGN_OR_RETURN(out->dspark, ParseDSparkHeadConfig(root, path));
  return Status::Ok();
}

// DeepSpec's layout as its build_draft_config writes it: architectures, the drafting fields at
// the top level, every layer full attention, untied (the frozen embedding and LM head copies are
// tensors of their own), and the heads. num_anchors only sizes DeepSpec's training batches.
void WriteDSparkLayout(const DFlashConfig& c, nlohmann::json& j) {
  j["architectures"] = {kDSparkArchitecture};
  j["block_size"] = c.block_size;
  j["mask_token_id"] = c.mask_token_id;
  j["target_layer_ids"] = c.target_layer_ids;
  j["num_target_layers"] = c.num_target_layers;
  j["num_anchors"] = 512;
  j["tie_word_embeddings"] = false;
  j["layer_types"] =
      std::vector<std::string>(static_cast<size_t>(c.draft.num_hidden_layers), "full_attention");
  WriteDSparkHeadConfig(*c.dspark, j);
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
                          " tokens differs from the target's " + std::to_string(target.vocab_size) +
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
    // DeepSpec trains and drafts from transformers' hidden_states[id + 1], which for the last
    // layer is the final-normed state rather than the layer's output, and refuses it
    // (assert_no_final_target_layer); so does dscale, which captures layer outputs.
    if (c.is_dspark() && id == target.num_hidden_layers - 1) {
      return FieldError(path, "target_layer_ids",
                        "layer " + std::to_string(id) + " is the target's last, which a " +
                            kDSparkArchitecture + " drafter may not read");
    }
  }
  return Status::Ok();
}

}  // namespace

DraftAttention DFlashConfig::LayerAttention(int64_t layer) const {
  const bool sliding =
      !layer_types.empty() && layer_types[static_cast<size_t>(layer)] == DraftLayerType::kSliding;
  return {.causal = is_causal.value_or(sliding), .window = sliding ? sliding_window : 0};
}

DraftBlock DFlashConfig::Block() const {
  return {.input_rows = block_size, .first_prediction_row = is_dspark() ? 0 : 1};
}

bool DFlashConfig::IsPlainLayout() const {
  for (int64_t layer = 0; layer < draft.num_hidden_layers; ++layer) {
    if (LayerAttention(layer) != DraftAttention{}) return false;
  }
  return input_embedding_scale == 1.0;
}

std::vector<int32_t> DeriveTargetLayerIds(int64_t num_target_layers, int64_t num_draft_layers) {
  if (num_draft_layers == 1) return {static_cast<int32_t>(num_target_layers / 2)};
  const double start = 1.0;
  const double span = static_cast<double>(num_target_layers - 3) - start;
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < num_draft_layers; ++i) {
    // nearbyint rounds half to even under the default rounding mode, as the reference does.
    const double x =
        start + static_cast<double>(i) * span / static_cast<double>(num_draft_layers - 1);
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
  DSCALE_ASSIGN_OR_RETURN(const DrafterLayout layout, LayoutOf(*root, path));
  DFlashConfig config;
  // The draft layers are Qwen3's whatever the target.
  DSCALE_RETURN_IF_ERROR(ReadDraftTransformerConfig(ConfigFieldReader(*root, name), &config.draft));
  if (layout == DrafterLayout::kDSpark) {
    DSCALE_RETURN_IF_ERROR(ReadDSparkLayout(*root, path, &config));
  } else {
    DSCALE_RETURN_IF_ERROR(ReadDraftingFields(*root, path, &config));
    DSCALE_ASSIGN_OR_RETURN(config.domino, ParseDominoHeadConfig(*root, path));
  }
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
  if (c.is_dspark()) {
    WriteDSparkLayout(c, j);
    return j.dump(2);
  }
  j["architectures"] = {kDFlashArchitecture};
  j["block_size"] = c.block_size;
  j["num_target_layers"] = c.num_target_layers;
  j["dflash_config"] = {{"mask_token_id", c.mask_token_id},
                        {"target_layer_ids", c.target_layer_ids}};
  if (!c.layer_types.empty()) {
    nlohmann::json types = nlohmann::json::array();
    for (const DraftLayerType t : c.layer_types) {
      types.push_back(t == DraftLayerType::kSliding ? "sliding_attention" : "full_attention");
    }
    j["layer_types"] = types;
  }
  if (c.sliding_window > 0) {
    j["sliding_window"] = c.sliding_window;
    j["use_sliding_window"] = true;
  }
  if (c.is_causal.has_value()) j["is_causal"] = *c.is_causal;
  if (c.input_embedding_scale != 1.0) {
    j["dflash_config"]["input_embedding_scale"] = c.input_embedding_scale;
  }
  if (c.domino.has_value()) j["domino_config"] = DominoHeadConfigToJson(*c.domino);
  return j.dump(2);
}

}  // namespace dscale
