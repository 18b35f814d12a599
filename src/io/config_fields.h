#pragma once
// What every family's config.json reader shares: typed field reads that name the field and
// what was expected, the fields every dense decoder has, and their cross-field checks.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "io/decoder_config.h"

namespace dscale {

// Reads typed fields out of a config object. Every error is
// "<path>: field "<name>": <problem>".
class ConfigFieldReader {
 public:
  ConfigFieldReader(const nlohmann::json& root, std::string path);

  Status Error(std::string_view field, const std::string& problem) const;
  // The file the errors name.
  const std::string& path() const { return path_; }
  // nullptr when the field is absent or null: optional fields treat null as absent.
  const nlohmann::json* Get(const char* field) const;
  // The field's value as JSON text, for messages; the field must be present.
  std::string Describe(const char* field) const;
  // True when the field is absent, null or equal to `plain`.
  bool IsAbsentOr(const char* field, const nlohmann::json& plain) const;
  // A reader of the object field `field` (which must be present), its errors naming
  // "<field>.<name>".
  ConfigFieldReader Nested(const char* field) const;

  Status PositiveInt(const char* field, int64_t* out) const;
  // Leaves `out` untouched when absent.
  Status OptionalPositiveInt(const char* field, std::optional<int64_t>* out) const;
  Status PositiveNumber(const char* field, double* out) const;
  Status OptionalBool(const char* field, bool* out) const;
  // An id, a list of ids, or null/absent (no ids). Each must lie in [0, vocab_size).
  Status OptionalTokenIds(const char* field, int64_t vocab_size, std::vector<int64_t>* out) const;

 private:
  Status PositiveIntValue(const char* field, const nlohmann::json& value, int64_t* out) const;

  const nlohmann::json& root_;
  std::string path_;
  std::string prefix_;  // "<field>." inside a nested object
};

// The fields every dense decoder reads the same way: sizes, ε, θ, positions, tied head, BOS/EOS
// and head_dim (hidden_size / num_attention_heads when absent), then the cross-field checks
// (heads a multiple of kv heads, even head_dim). Without `read_rope_theta` θ is left to the
// family's reader (Qwen3.5 keeps it in `rope_parameters`); without `dense_mlp` intermediate_size
// is not read (0: every layer's MLP is sparse, as in Qwen3.5-MoE).
Status ReadDecoderFields(const ConfigFieldReader& reader, DecoderConfig* config,
                         bool read_rope_theta = true, bool dense_mlp = true);

// The fields every mixture-of-experts family reads the same way into a cleared `moe`:
// num_experts, num_experts_per_tok (at most num_experts) and moe_intermediate_size.
Status ReadExpertFields(const ConfigFieldReader& reader, MoeConfig* moe);

// Checks common to the supported families: hidden_act "silu", no attention or MLP bias.
Status CheckDenseDecoderFeatures(const ConfigFieldReader& reader);
// A target's attention layout: no sliding window, every layer full attention. (DFlash drafters
// read theirs instead: io/dflash_config.h.)
Status CheckFullAttentionLayers(const ConfigFieldReader& reader);

// The fields ReadDecoderFields reads, as a Hugging Face config.json writes them, with the dense
// decoder's fixed ones (SiLU, no attention bias or dropout, BF16, KV cache on); a family adds
// its architecture, model_type, RoPE scaling and own fields.
nlohmann::json DecoderFieldsJson(const DecoderConfig& config);

// Token ids the HF way: null when none, a bare int when one, a list otherwise.
nlohmann::json TokenIdsToJson(const std::vector<int64_t>& ids);
// Integral values as JSON integers (as HF writes rope_theta), others as doubles.
nlohmann::json NumberToJson(double value);

}  // namespace dscale
