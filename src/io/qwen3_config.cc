// Qwen3 config.json: typed field readers that name the field and what was expected, then the
// cross-field checks the engine relies on.

#include "io/qwen3_config.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "io/file_util.h"
#include "io/json_util.h"

namespace dscale {
namespace {

// Far above any real model, low enough that products of two sizes stay well inside int64.
constexpr int64_t kMaxSize = int64_t{1} << 31;

// Reads typed fields out of the config object. Every error is
// "<path>: field "<name>": <problem>".
class FieldReader {
 public:
  FieldReader(const nlohmann::json& root, std::string path) : root_(root), path_(std::move(path)) {}

  Status Error(std::string_view field, const std::string& problem) const {
    return InvalidArgument(path_ + ": field \"" + std::string(field) + "\": " + problem);
  }

  // nullptr when the field is absent or null: optional fields treat null as absent.
  const nlohmann::json* Get(const char* field) const { return JsonMember(root_, field); }

  std::string Name(std::string_view field) const { return JsonFieldName(path_, field); }

  Status PositiveInt(const char* field, int64_t* out) const {
    const nlohmann::json* value = Get(field);
    if (value == nullptr) return Error(field, "missing (expected a positive integer)");
    return PositiveIntValue(field, *value, out);
  }

  // Leaves `out` untouched when absent.
  Status OptionalPositiveInt(const char* field, std::optional<int64_t>* out) const {
    const nlohmann::json* value = Get(field);
    if (value == nullptr) return Status::Ok();
    int64_t parsed = 0;
    DSCALE_RETURN_IF_ERROR(PositiveIntValue(field, *value, &parsed));
    *out = parsed;
    return Status::Ok();
  }

  Status PositiveNumber(const char* field, double* out) const {
    const nlohmann::json* value = Get(field);
    if (value == nullptr) return Error(field, "missing (expected a positive number)");
    const Result<double> x = ReadJsonNumber(*value, Name(field));
    if (!x.ok() || !(*x > 0)) {
      return Error(field, "expected a positive number, got " + DescribeJson(*value));
    }
    *out = *x;
    return Status::Ok();
  }

  Status OptionalBool(const char* field, bool* out) const {
    const nlohmann::json* value = Get(field);
    if (value == nullptr) return Status::Ok();
    DSCALE_ASSIGN_OR_RETURN(*out, ReadJsonBool(*value, Name(field)));
    return Status::Ok();
  }

  // An id, a list of ids, or null/absent (no ids). Each must lie in [0, vocab_size).
  Status OptionalTokenIds(const char* field, int64_t vocab_size, std::vector<int64_t>* out) const {
    out->clear();
    const nlohmann::json* value = Get(field);
    if (value == nullptr) return Status::Ok();
    const char* expected = "expected a token id, a list of token ids or null, got ";
    // Each id is checked as the JSON number it is: nothing past int64 is wrapped into range.
    const auto id_of = [&](const nlohmann::json& item) {
      return ReadJsonInt(item, Name(field), std::numeric_limits<int64_t>::lowest(),
                         std::numeric_limits<int64_t>::max());
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

 private:
  Status PositiveIntValue(const char* field, const nlohmann::json& value, int64_t* out) const {
    // Checked as the JSON number it is (a float, a negative value, or one past int64 is
    // refused) before the size limit.
    const Result<int64_t> parsed =
        ReadJsonInt(value, Name(field), 1, std::numeric_limits<int64_t>::max());
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

  const nlohmann::json& root_;
  std::string path_;
};

Status ReadFields(const FieldReader& reader, Qwen3Config* config) {
  DSCALE_RETURN_IF_ERROR(reader.PositiveInt("vocab_size", &config->vocab_size));
  DSCALE_RETURN_IF_ERROR(reader.PositiveInt("hidden_size", &config->hidden_size));
  DSCALE_RETURN_IF_ERROR(reader.PositiveInt("intermediate_size", &config->intermediate_size));
  DSCALE_RETURN_IF_ERROR(reader.PositiveInt("num_hidden_layers", &config->num_hidden_layers));
  DSCALE_RETURN_IF_ERROR(reader.PositiveInt("num_attention_heads", &config->num_attention_heads));
  DSCALE_RETURN_IF_ERROR(reader.PositiveInt("num_key_value_heads", &config->num_key_value_heads));
  DSCALE_RETURN_IF_ERROR(reader.PositiveNumber("rms_norm_eps", &config->rms_norm_eps));
  DSCALE_RETURN_IF_ERROR(reader.PositiveNumber("rope_theta", &config->rope_theta));
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
  return Status::Ok();
}

Status CheckConsistency(const FieldReader& reader, const Qwen3Config& config) {
  if (config.num_attention_heads % config.num_key_value_heads != 0) {
    return reader.Error("num_key_value_heads", std::to_string(config.num_key_value_heads) +
                                                   " does not divide num_attention_heads " +
                                                   std::to_string(config.num_attention_heads));
  }
  if (config.head_dim % 2 != 0) {
    return reader.Error("head_dim", std::to_string(config.head_dim) +
                                        " is odd; rotary embeddings rotate pairs of dims");
  }
  return Status::Ok();
}

// Architecture variants Hugging Face's Qwen3 code supports and this model does not: each one,
// when asked for, is refused by name instead of being silently ignored.
Status CheckSupportedFeatures(const FieldReader& reader) {
  const auto is = [&](const char* field, const nlohmann::json& plain) {
    const nlohmann::json* value = reader.Get(field);
    return value == nullptr || *value == plain;
  };
  const auto got = [&](const char* field) { return DescribeJson(*reader.Get(field)); };
  if (!is("model_type", "qwen3")) {
    return reader.Error("model_type", "expected \"qwen3\", got " + got("model_type"));
  }
  if (!is("hidden_act", "silu")) {
    return reader.Error("hidden_act",
                        "only \"silu\" (SwiGLU) is supported, got " + got("hidden_act"));
  }
  if (!is("attention_bias", false)) {
    return reader.Error("attention_bias", "biased attention projections are not supported, got " +
                                              got("attention_bias"));
  }
  if (reader.Get("rope_scaling") != nullptr) {
    return reader.Error("rope_scaling",
                        "scaled rotary embeddings (YaRN, linear, dynamic) are "
                        "not supported; expected null, got " +
                            got("rope_scaling"));
  }
  if (!is("use_sliding_window", false)) {
    return reader.Error("use_sliding_window", "sliding-window attention is not supported, got " +
                                                  got("use_sliding_window"));
  }
  if (const nlohmann::json* types = reader.Get("layer_types"); types != nullptr) {
    const bool all_full =
        types->is_array() && std::all_of(types->begin(), types->end(), [](const nlohmann::json& t) {
          return t == "full_attention";
        });
    if (!all_full) {
      return reader.Error("layer_types",
                          "every layer must be \"full_attention\", got " + got("layer_types"));
    }
  }
  return Status::Ok();
}

// Token ids the HF way: null when none, a bare int when one, a list otherwise.
nlohmann::json TokenIdsToJson(const std::vector<int64_t>& ids) {
  if (ids.empty()) return nullptr;
  if (ids.size() == 1) return ids[0];
  return ids;
}

// Integral values as JSON integers (as HF writes rope_theta), others as doubles.
nlohmann::json NumberToJson(double value) {
  if (value == std::floor(value) && std::fabs(value) < 9.0e15) {
    return static_cast<int64_t>(value);
  }
  return value;
}

}  // namespace

Result<Qwen3Config> ParseQwen3Config(const std::string& json_text, const std::string& path) {
  const std::string name = path.empty() ? "config.json" : path;
  Result<nlohmann::json> root = ParseJsonDocument(json_text);
  if (!root.ok()) return root.status().WithContext(name);
  if (!root->is_object()) {
    return DataLoss(name + ": the config is " + DescribeJson(*root) + ", expected a JSON object");
  }
  const FieldReader reader(*root, name);
  Qwen3Config config;
  DSCALE_RETURN_IF_ERROR(ReadFields(reader, &config));
  DSCALE_RETURN_IF_ERROR(CheckConsistency(reader, config));
  DSCALE_RETURN_IF_ERROR(CheckSupportedFeatures(reader));
  return config;
}

Result<Qwen3Config> LoadQwen3Config(const std::string& path) {
  DSCALE_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path));
  return ParseQwen3Config(text, path);
}

std::string Qwen3ConfigToJson(const Qwen3Config& config) {
  const nlohmann::json json = {
      {"architectures", nlohmann::json::array({"Qwen3ForCausalLM"})},
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
      {"max_window_layers", config.num_hidden_layers},
      {"model_type", "qwen3"},
      {"num_attention_heads", config.num_attention_heads},
      {"num_hidden_layers", config.num_hidden_layers},
      {"num_key_value_heads", config.num_key_value_heads},
      {"rms_norm_eps", config.rms_norm_eps},
      {"rope_scaling", nullptr},
      {"rope_theta", NumberToJson(config.rope_theta)},
      {"sliding_window", nullptr},
      {"tie_word_embeddings", config.tie_word_embeddings},
      {"torch_dtype", "bfloat16"},
      {"use_cache", true},
      {"use_sliding_window", false},
      {"vocab_size", config.vocab_size},
  };
  return json.dump(2) + "\n";
}

}  // namespace dscale
