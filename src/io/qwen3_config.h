#pragma once
// The Qwen3 family's config.json (Qwen3ForCausalLM, model_type "qwen3"; Qwen3MoeForCausalLM,
// model_type "qwen3_moe") and the DFlash drafters' transformer, whose layers are Qwen3's whatever
// the target. Called by decoder_config.cc's dispatch and dflash_config.cc.

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "io/config_fields.h"
#include "io/decoder_config.h"

namespace dscale {

// A Qwen3 target: the common fields, q/k norms, and refusal of any rope_scaling.
Status ReadQwen3Config(const ConfigFieldReader& reader, DecoderConfig* config);
// A DFlash drafter's transformer: Qwen3 layers with their own RoPE, which may carry a llama3
// rope_scaling (drafters of Llama 3.1 targets); `architectures` is the drafter's and not read,
// nor the attention layout (sliding windows, layer types), which dflash_config.cc reads.
Status ReadDraftTransformerConfig(const ConfigFieldReader& reader, DecoderConfig* config);
// HF's Qwen3ForCausalLM config for `config` (rope_scaling written when set, for drafters).
nlohmann::json Qwen3ConfigJson(const DecoderConfig& config);

// A Qwen3-MoE target (Qwen3MoeForCausalLM, model_type "qwen3_moe"): Qwen3's
// fields and attention, and the sparse MLP's (MoeConfig): num_experts, num_experts_per_tok and
// moe_intermediate_size required, norm_topk_prob (false), decoder_sparse_step (1) and
// mlp_only_layers ([]) optional as in transformers' Qwen3MoeConfig; a shared expert is refused.
Status ReadQwen3MoeConfig(const ConfigFieldReader& reader, DecoderConfig* config);
nlohmann::json Qwen3MoeConfigJson(const DecoderConfig& config);

}  // namespace dscale
