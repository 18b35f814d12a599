#pragma once
// The Qwen3 checkpoints' shapes by name, as their config.json files give them: vocab 151936, KV
// heads of 128 (8; 4 for the MoE), RMSNorm ε 1e-6, RoPE θ 1e6, 40960 positions, EOS 151645.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/decoder_config.h"

namespace dscale {

// "qwen3-0.6b", "qwen3-1.7b", "qwen3-4b" (tied LM heads), "qwen3-8b" or the mixture of experts
// "qwen3-30b-a3b" (Qwen3MoeForCausalLM: hidden 2048, 48 layers, 128 experts of 768, top 8,
// norm_topk_prob, dense intermediate 6144 unused); nullopt for any other.
std::optional<DecoderConfig> NamedQwen3Config(std::string_view name);

// The names NamedQwen3Config knows, smallest first.
const std::vector<std::string>& NamedQwen3ConfigNames();

}  // namespace dscale
