#include "io/qwen3_shapes.h"

#include <cstdint>

namespace dscale {
namespace {

DecoderConfig DenseQwen3(int64_t hidden, int64_t intermediate, int64_t layers, int64_t heads,
                         bool tie) {
  return {.vocab_size = 151936,
          .hidden_size = hidden,
          .intermediate_size = intermediate,
          .num_hidden_layers = layers,
          .num_attention_heads = heads,
          .num_key_value_heads = 8,
          .head_dim = 128,
          .rms_norm_eps = 1e-6,
          .rope_theta = 1e6,
          .tie_word_embeddings = tie,
          .max_position_embeddings = 40960,
          .bos_token_ids = {},
          .eos_token_ids = {151645}};
}

// Qwen3-30B-A3B's config.json: 48 layers of 32 query heads over 4 KV heads of 128, every MLP
// sparse (128 experts of 768, top 8, renormalised), BOS 151643.
DecoderConfig Qwen3_30bA3b() {
  DecoderConfig c = DenseQwen3(2048, 6144, 48, 32, false);
  c.family = ModelFamily::kQwen3Moe;
  c.num_key_value_heads = 4;
  c.bos_token_ids = {151643};
  c.moe = {.num_experts = 128,
           .experts_per_token = 8,
           .expert_intermediate_size = 768,
           .norm_topk_prob = true,
           .decoder_sparse_step = 1,
           .mlp_only_layers = {}};
  return c;
}

}  // namespace

std::optional<DecoderConfig> NamedQwen3Config(std::string_view name) {
  if (name == "qwen3-30b-a3b") return Qwen3_30bA3b();
  if (name == "qwen3-0.6b") return DenseQwen3(1024, 3072, 28, 16, true);
  if (name == "qwen3-1.7b") return DenseQwen3(2048, 6144, 28, 16, true);
  if (name == "qwen3-4b") return DenseQwen3(2560, 9728, 36, 32, true);
  if (name == "qwen3-8b") return DenseQwen3(4096, 12288, 36, 32, false);
  return std::nullopt;
}

const std::vector<std::string>& NamedQwen3ConfigNames() {
  static const std::vector<std::string> names = {"qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b",
                                                 "qwen3-30b-a3b"};
  return names;
}

}  // namespace dscale
