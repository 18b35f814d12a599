#include "io/llama_shapes.h"

#include <cstdint>

namespace dscale {
namespace {

DecoderConfig DenseLlama(int64_t hidden, int64_t intermediate, int64_t layers, int64_t heads,
                         int64_t head_dim, bool tie, double rope_factor) {
  return {.family = ModelFamily::kLlama,
          .vocab_size = 128256,
          .hidden_size = hidden,
          .intermediate_size = intermediate,
          .num_hidden_layers = layers,
          .num_attention_heads = heads,
          .num_key_value_heads = 8,
          .head_dim = head_dim,
          .rms_norm_eps = 1e-5,
          .rope_theta = 500000.0,
          .rope_scaling = {.type = RopeScalingType::kLlama3,
                           .factor = rope_factor,
                           .low_freq_factor = 1.0,
                           .high_freq_factor = 4.0,
                           .original_max_position_embeddings = 8192},
          .qk_norm = false,
          .tie_word_embeddings = tie,
          .max_position_embeddings = 131072,
          .bos_token_ids = {128000},
          .eos_token_ids = {128001, 128008, 128009}};
}

}  // namespace

std::optional<DecoderConfig> NamedLlamaConfig(std::string_view name) {
  if (name == "llama-3.2-1b") return DenseLlama(2048, 8192, 16, 32, 64, true, 32.0);
  if (name == "llama-3.2-3b") return DenseLlama(3072, 8192, 28, 24, 128, true, 32.0);
  if (name == "llama-3.1-8b") return DenseLlama(4096, 14336, 32, 32, 128, false, 8.0);
  return std::nullopt;
}

const std::vector<std::string>& NamedLlamaConfigNames() {
  static const std::vector<std::string> names = {"llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b"};
  return names;
}

}  // namespace dscale
