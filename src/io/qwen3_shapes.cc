#include "io/qwen3_shapes.h"

#include <algorithm>
#include <cstdint>

#include "io/qwen3_5_config.h"

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

// A dense Qwen3.5's text config (qwen3_shapes.h states what the published ones share): Qwen3's
// fields where they agree (ε, the q/k norms), its own vocabulary, heads, RoPE and hybrid layout.
DecoderConfig DenseQwen3_5(int64_t hidden, int64_t intermediate, int64_t layers, int64_t heads,
                           int64_t linear_value_heads, bool tie) {
  DecoderConfig c = DenseQwen3(hidden, intermediate, layers, heads, tie);
  c.family = ModelFamily::kQwen3_5;
  c.vocab_size = 248320;
  c.num_key_value_heads = 4;
  c.head_dim = 256;
  c.rope_theta = 1e7;
  c.max_position_embeddings = 262144;
  c.eos_token_ids = {248044};
  c.hybrid = {.layer_types = IntervalLayerTypes(layers, 4),
              .linear = {.key_heads = 16,
                         .value_heads = linear_value_heads,
                         .key_head_dim = 128,
                         .value_head_dim = 128,
                         .conv_kernel = 4},
              .partial_rotary_factor = 0.25,
              .attention_output_gate = true,
              .zero_centred_norms = true,
              .multimodal_layout = true};
  return c;
}

// Qwen3.5-35B-A3B's text config: the hybrid layout at hidden 2048 over 40 layers, 16 query heads
// over 2 KV heads, every MLP sparse (256 experts of 512, top 8, and a shared expert of 512),
// untied.
DecoderConfig Qwen3_5_35bA3b() {
  DecoderConfig c = DenseQwen3_5(2048, 0, 40, 16, 32, false);
  c.family = ModelFamily::kQwen3_5Moe;
  c.num_key_value_heads = 2;
  c.moe = {.num_experts = 256,
           .experts_per_token = 8,
           .expert_intermediate_size = 512,
           .norm_topk_prob = true,
           .shared_expert_intermediate_size = 512,
           .fused_experts = true};
  return c;
}

}  // namespace

std::optional<DecoderConfig> NamedQwen3Config(std::string_view name) {
  if (name == "qwen3-30b-a3b") return Qwen3_30bA3b();
  if (name == "qwen3.5-35b-a3b") return Qwen3_5_35bA3b();
  if (name == "qwen3.5-4b") return DenseQwen3_5(2560, 9216, 32, 16, 32, true);
  if (name == "qwen3.5-9b") return DenseQwen3_5(4096, 12288, 32, 16, 32, false);
  if (name == "qwen3.5-27b") return DenseQwen3_5(5120, 17408, 64, 24, 48, false);
  if (name == "qwen3-0.6b") return DenseQwen3(1024, 3072, 28, 16, true);
  if (name == "qwen3-1.7b") return DenseQwen3(2048, 6144, 28, 16, true);
  if (name == "qwen3-4b") return DenseQwen3(2560, 9728, 36, 32, true);
  if (name == "qwen3-8b") return DenseQwen3(4096, 12288, 36, 32, false);
  return std::nullopt;
}

DecoderConfig ShapeWithLayers(DecoderConfig shape, int64_t layers) {
  std::vector<LayerKind>& types = shape.hybrid.layer_types;
  if (!types.empty()) {
    const auto every =
        std::find(types.begin(), types.end(), LayerKind::kFullAttention) - types.begin() + 1;
    types = IntervalLayerTypes(layers, every);
  }
  shape.num_hidden_layers = layers;
  return shape;
}

const std::vector<std::string>& NamedQwen3ConfigNames() {
  static const std::vector<std::string> names = {"qwen3-0.6b", "qwen3-1.7b",    "qwen3-4b",
                                                 "qwen3-8b",   "qwen3-30b-a3b", "qwen3.5-4b",
                                                 "qwen3.5-9b", "qwen3.5-27b",   "qwen3.5-35b-a3b"};
  return names;
}

}  // namespace dscale
