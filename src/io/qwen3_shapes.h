#pragma once
// The dense Qwen3 checkpoints' shapes by name, as their config.json files give them: vocab
// 151936, 8 KV heads of 128, RMSNorm ε 1e-6, RoPE θ 1e6, 40960 positions, EOS 151645.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/decoder_config.h"

namespace dscale {

// "qwen3-0.6b", "qwen3-1.7b", "qwen3-4b" (tied LM heads) or "qwen3-8b"; nullopt for any other.
std::optional<DecoderConfig> NamedQwen3Config(std::string_view name);

// The names NamedQwen3Config knows, smallest first.
const std::vector<std::string>& NamedQwen3ConfigNames();

}  // namespace dscale
