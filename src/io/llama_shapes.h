#pragma once
// The Llama 3.x checkpoints' shapes by name, as their config.json files give them: vocab 128256,
// 8 KV heads, RMSNorm ε 1e-5, RoPE θ 500000 with llama3 rope_scaling (low 1, high 4, original
// context 8192), 131072 positions, BOS 128000, EOS 128001, 128008 and 128009 (the Instruct
// models' list).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/decoder_config.h"

namespace dscale {

// "llama-3.2-1b" (hidden 2048, 16 layers, 32 heads of 64, MLP 8192, tied, rope factor 32),
// "llama-3.2-3b" (3072, 28 layers, 24 heads of 128, MLP 8192, tied, factor 32) or
// "llama-3.1-8b" (4096, 32 layers, 32 heads of 128, MLP 14336, untied, factor 8); nullopt for
// any other.
std::optional<DecoderConfig> NamedLlamaConfig(std::string_view name);

// The names NamedLlamaConfig knows, smallest first.
const std::vector<std::string>& NamedLlamaConfigNames();

}  // namespace dscale
