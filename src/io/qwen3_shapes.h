#pragma once
// The Qwen3 and Qwen3.5 checkpoints' shapes by name, as their config.json files give them.
// Qwen3: vocab 151936, KV heads of 128 (8; 4 for the MoE), RMSNorm ε 1e-6, RoPE θ 1e6, 40960
// positions, EOS 151645. Qwen3.5 (dense; the text model of Qwen3_5ForConditionalGeneration as
// Qwen/Qwen3.5-4B, -9B and -27B publish it on Hugging Face): vocab 248320, every fourth layer full
// attention (query heads over 4 KV heads of 256, an output gate, a quarter of each head rotated,
// θ 1e7) and the others Gated DeltaNet (16 key heads of 128, value heads of 128, conv kernel 4),
// ε 1e-6, 262144 positions, EOS 248044.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/decoder_config.h"

namespace dscale {

// "qwen3-0.6b", "qwen3-1.7b", "qwen3-4b" (tied LM heads), "qwen3-8b", the mixture of experts
// "qwen3-30b-a3b" (Qwen3MoeForCausalLM: hidden 2048, 48 layers, 128 experts of 768, top 8,
// norm_topk_prob, dense intermediate 6144 unused), or the hybrids "qwen3.5-4b" (hidden 2560,
// intermediate 9216, 32 layers, 16 query heads, 32 linear value heads, tied), "qwen3.5-9b" (4096,
// 12288, 32, 16, 32, untied) and "qwen3.5-27b" (5120, 17408, 64, 24, 48, untied), and their
// mixture of experts "qwen3.5-35b-a3b" (Qwen3_5MoeForConditionalGeneration: hidden 2048, 40
// layers, 16 query heads over 2 KV heads, 32 linear value heads, 256 experts of 512, top 8, a
// shared expert of 512, untied; as transformers' Qwen3_5MoeTextConfig defaults and the published
// training recipes give it), in the multimodal layout; nullopt for any other.
std::optional<DecoderConfig> NamedQwen3Config(std::string_view name);

// `shape` with `layers` layers (the first ones, or more of the same kind): a hybrid's in its
// spacing of full-attention layers.
DecoderConfig ShapeWithLayers(DecoderConfig shape, int64_t layers);

// The names NamedQwen3Config knows, smallest first.
const std::vector<std::string>& NamedQwen3ConfigNames();

}  // namespace dscale
