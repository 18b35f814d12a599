#pragma once
// Qwen3 `config.json`: the fields the engine needs, validated.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace dscale {

struct Qwen3Config {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;  // defaults to hidden_size / num_attention_heads when absent
  double rms_norm_eps = 1e-6;
  double rope_theta = 1e6;
  bool tie_word_embeddings = false;
  int64_t max_position_embeddings = 0;
  std::vector<int64_t> bos_token_ids;  // may be empty (Qwen3 has bos null)
  std::vector<int64_t> eos_token_ids;  // `eos_token_id` may be an int or a list

  int64_t q_dim() const { return num_attention_heads * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }

  bool operator==(const Qwen3Config&) const = default;
};

// Parses and validates. Missing required fields, wrong types, non-positive sizes, heads not a
// multiple of kv heads, odd head_dim, token ids outside the vocabulary: InvalidArgument naming
// `path` (or "config.json" when `path` is empty) and the field. Text that is not a JSON object:
// DataLoss. Optional fields given as null count as absent; fields the engine does not use are
// ignored.
Result<Qwen3Config> ParseQwen3Config(const std::string& json_text, const std::string& path);
Result<Qwen3Config> LoadQwen3Config(const std::string& path);

// The JSON a Hugging Face Qwen3ForCausalLM checkpoint carries for `config`.
std::string Qwen3ConfigToJson(const Qwen3Config& config);

}  // namespace dscale
