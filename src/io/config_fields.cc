// The shared config.json field readers and the dense decoder's common fields.

#include "io/config_fields.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "io/json_util.h"

namespace dscale {
namespace {

// Far above any real model, low enough that products of two sizes stay well inside int64.
constexpr int64_t kMaxSize = int64_t{1} << 31;

}  // namespace

ConfigFieldReader::ConfigFieldReader(const nlohmann::json& root, std::string path)
    : root_(root), path_(std::move(path)) {}

Status ConfigFieldReader::Error(std::string_view field, const std::string& problem) const {
  return InvalidArgument(path_ + ": field \"" + prefix_ + std::string(field) + "\": " + problem);
}

const nlohmann::json* ConfigFieldReader::Get(const char* field) const {
  return JsonMember(root_, field);
}

std::string ConfigFieldReader::Describe(const char* field) const {
  return DescribeJson(*Get(field));
}

bool ConfigFieldReader::IsAbsentOr(const char* field, const nlohmann::json& plain) const {
  const nlohmann::json* value = Get(field);
  return value == nullptr || *value == plain;
}

ConfigFieldReader ConfigFieldReader::Nested(const char* field) const {
  const nlohmann::json* value = Get(field);
  DSCALE_CHECK(value != nullptr);
  ConfigFieldReader nested(*value, path_);
  nested.prefix_ = prefix_ + field + ".";
  return nested;
}

Status ConfigFieldReader::PositiveInt(const char* field, int64_t* out) const {
  const nlohmann::json* value = Get(field);
  if (value == nullptr) return Error(field, "missing (expected a positive integer)");
  return PositiveIntValue(field, *value, out);
}

Status ConfigFieldReader::OptionalPositiveInt(const char* field,
                                              std::optional<int64_t>* out) const {
  const nlohmann::json* value = Get(field);
  if (value == nullptr) return Status::Ok();
  int64_t parsed = 0;
  DSCALE_RETURN_IF_ERROR(PositiveIntValue(field, *value, &parsed));
  *out = parsed;
  return Status::Ok();
}

Status ConfigFieldReader::PositiveNumber(const char* field, double* out) const {
  const nlohmann::json* value = Get(field);
  if (value == nullptr) return Error(field, "missing (expected a positive number)");
  const Result<double> x = ReadJsonNumber(*value, JsonFieldName(path_, prefix_ + field));
  if (!x.ok() || !(*x > 0)) {
    return Error(field, "expected a positive number, got " + DescribeJson(*value));
  }
  *out = *x;
  return Status::Ok();
}

Status ConfigFieldReader::OptionalBool(const char* field, bool* out) const {
  const nlohmann::json* value = Get(field);
  if (value == nullptr) return Status::Ok();
  DSCALE_ASSIGN_OR_RETURN(*out, ReadJsonBool(*value, JsonFieldName(path_, prefix_ + field)));
  return Status::Ok();
}

Status ConfigFieldReader::OptionalTokenIds(const char* field, int64_t vocab_size,
                                           std::vector<int64_t>* out) const {
  out->clear();
  const nlohmann::json* value = Get(field);
  if (value == nullptr) return Status::Ok();
  const char* expected = "expected a token id, a list of token ids or null, got ";
  // Each id is checked as the JSON number it is: nothing past int64 is wrapped into range.
  const auto id_of = [&](const nlohmann::json& item) {
    return ReadJsonInt(item, JsonFieldName(path_, prefix_ + field),
                       std::numeric_limits<int64_t>::lowest(), std::numeric_limits<int64_t>::max());
  };
  if (!value->is_array()) {
    const Result<int64_t> id = id_of(*value);
    if (!id.ok()) return Error(field, expected + DescribeJson(*value));
    out->push_back(*id);
  } else {
    for (const nlohmann::json& item : *value) {
      const Result<int64_t> id = id_of(item);
      if (!id.ok()) {
        return Error(field, expected + DescribeJson(*value) + " holding " + DescribeJson(item));
      }
      out->push_back(*id);
    }
  }
  for (const int64_t id : *out) {
    if (id < 0 || id >= vocab_size) {
      return Error(field, "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                              std::to_string(vocab_size) + ")");
    }
  }
  return Status::Ok();
}

Status ConfigFieldReader::PositiveIntValue(const char* field, const nlohmann::json& value,
                                           int64_t* out) const {
  // Checked as the JSON number it is (a float, a negative value, or one past int64 is
  // refused) before the size limit.
  const Result<int64_t> parsed = ReadJsonInt(value, JsonFieldName(path_, prefix_ + field), 1,
                                             std::numeric_limits<int64_t>::max());
  if (!parsed.ok()) {
    return Error(field, "expected a positive integer, got " + DescribeJson(value));
  }
  if (*parsed > kMaxSize) {
    return Error(field, std::to_string(*parsed) + " is too large (at most " +
                            std::to_string(kMaxSize) + ")");
  }
  *out = *parsed;
  return Status::Ok();
}

Status ReadDecoderFields(const ConfigFieldReader& reader, DecoderConfig* config,
                         bool read_rope_theta, bool dense_mlp) {
  DSCALE_RETURN_IF_ERROR(reader.PositiveInt("vocab_size", &config->vocab_size));
  DSCALE_RETURN_IF_ERROR(reader.PositiveInt("hidden_size", &config->hidden_size));
  config->intermediate_size = 0;
  if (dense_mlp) {
    DSCALE_RETURN_IF_ERROR(reader.PositiveInt("intermediate_size", &config->intermediate_size));
  }
  DSCALE_RETURN_IF_ERROR(reader.PositiveInt("num_hidden_layers", &config->num_hidden_layers));
  DSCALE_RETURN_IF_ERROR(reader.PositiveInt("num_attention_heads", &config->num_attention_heads));
  DSCALE_RETURN_IF_ERROR(reader.PositiveInt("num_key_value_heads", &config->num_key_value_heads));
  DSCALE_RETURN_IF_ERROR(reader.PositiveNumber("rms_norm_eps", &config->rms_norm_eps));
  if (read_rope_theta) {
    DSCALE_RETURN_IF_ERROR(reader.PositiveNumber("rope_theta", &config->rope_theta));
  }
  DSCALE_RETURN_IF_ERROR(
      reader.PositiveInt("max_position_embeddings", &config->max_position_embeddings));
  config->tie_word_embeddings = false;
  DSCALE_RETURN_IF_ERROR(reader.OptionalBool("tie_word_embeddings", &config->tie_word_embeddings));
  DSCALE_RETURN_IF_ERROR(
      reader.OptionalTokenIds("bos_token_id", config->vocab_size, &config->bos_token_ids));
  DSCALE_RETURN_IF_ERROR(
      reader.OptionalTokenIds("eos_token_id", config->vocab_size, &config->eos_token_ids));

  std::optional<int64_t> head_dim;
  DSCALE_RETURN_IF_ERROR(reader.OptionalPositiveInt("head_dim", &head_dim));
  if (head_dim) {
    config->head_dim = *head_dim;
  } else if (config->hidden_size % config->num_attention_heads != 0) {
    return reader.Error("head_dim", "absent, and hidden_size " +
                                        std::to_string(config->hidden_size) +
                                        " is not divisible by num_attention_heads " +
                                        std::to_string(config->num_attention_heads));
  } else {
    config->head_dim = config->hidden_size / config->num_attention_heads;
  }
  if (config->num_attention_heads % config->num_key_value_heads != 0) {
    return reader.Error("num_key_value_heads", std::to_string(config->num_key_value_heads) +
                                                   " does not divide num_attention_heads " +
                                                   std::to_string(config->num_attention_heads));
  }
  if (config->head_dim % 2 != 0) {
    return reader.Error("head_dim", std::to_string(config->head_dim) +
                                        " is odd; rotary embeddings rotate pairs of dims");
  }
  return Status::Ok();
}

Status ReadExpertFields(const ConfigFieldReader& reader, MoeConfig* moe) {
  *moe = {};
  DSCALE_RETURN_IF_ERROR(reader.PositiveInt("num_experts", &moe->num_experts));
  DSCALE_RETURN_IF_ERROR(reader.PositiveInt("num_experts_per_tok", &moe->experts_per_token));
  if (moe->experts_per_token > moe->num_experts) {
    return reader.Error("num_experts_per_tok", std::to_string(moe->experts_per_token) +
                                                   " is more than num_experts " +
                                                   std::to_string(moe->num_experts));
  }
  return reader.PositiveInt("moe_intermediate_size", &moe->expert_intermediate_size);
}

Status CheckDenseDecoderFeatures(const ConfigFieldReader& reader) {
  if (!reader.IsAbsentOr("hidden_act", "silu")) {
    return reader.Error(
        "hidden_act", "only \"silu\" (SwiGLU) is supported, got " + reader.Describe("hidden_act"));
  }
  if (!reader.IsAbsentOr("attention_bias", false)) {
    return reader.Error("attention_bias", "biased attention projections are not supported, got " +
                                              reader.Describe("attention_bias"));
  }
  if (!reader.IsAbsentOr("mlp_bias", false)) {
    return reader.Error(
        "mlp_bias", "biased MLP projections are not supported, got " + reader.Describe("mlp_bias"));
  }
  return Status::Ok();
}

Status CheckFullAttentionLayers(const ConfigFieldReader& reader) {
  if (!reader.IsAbsentOr("use_sliding_window", false)) {
    return reader.Error("use_sliding_window", "sliding-window attention is not supported, got " +
                                                  reader.Describe("use_sliding_window"));
  }
  if (const nlohmann::json* types = reader.Get("layer_types"); types != nullptr) {
    const bool all_full =
        types->is_array() && std::all_of(types->begin(), types->end(), [](const nlohmann::json& t) {
          return t == "full_attention";
        });
    if (!all_full) {
      return reader.Error("layer_types", "every layer must be \"full_attention\", got " +
                                             reader.Describe("layer_types"));
    }
  }
  return Status::Ok();
}

nlohmann::json DecoderFieldsJson(const DecoderConfig& config) {
  return {
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"bos_token_id", TokenIdsToJson(config.bos_token_ids)},
      {"eos_token_id", TokenIdsToJson(config.eos_token_ids)},
      {"head_dim", config.head_dim},
      {"hidden_act", "silu"},
      {"hidden_size", config.hidden_size},
      {"initializer_range", 0.02},
      {"intermediate_size", config.intermediate_size},
      {"max_position_embeddings", config.max_position_embeddings},
      {"num_attention_heads", config.num_attention_heads},
      {"num_hidden_layers", config.num_hidden_layers},
      {"num_key_value_heads", config.num_key_value_heads},
      {"rms_norm_eps", config.rms_norm_eps},
      {"rope_theta", NumberToJson(config.rope_theta)},
      {"tie_word_embeddings", config.tie_word_embeddings},
      {"torch_dtype", "bfloat16"},
      {"use_cache", true},
      {"vocab_size", config.vocab_size},
  };
}

nlohmann::json TokenIdsToJson(const std::vector<int64_t>& ids) {
  if (ids.empty()) return nullptr;
  if (ids.size() == 1) return ids[0];
  return ids;
}

nlohmann::json NumberToJson(double value) {
  if (value == std::floor(value) && std::fabs(value) < 9.0e15) {
    return static_cast<int64_t>(value);
  }
  return value;
}

}  // namespace dscale
