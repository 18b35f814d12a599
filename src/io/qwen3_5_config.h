#pragma once
// The dense Qwen3.5 / Qwen3.6 family's config.json (transformers' Qwen3_5Config and
// Qwen3_5TextConfig): Qwen3_5ForConditionalGeneration (model_type "qwen3_5", the text model's
// fields under `text_config`, its weights under "model.language_model.") or Qwen3_5ForCausalLM
// (model_type "qwen3_5_text", fields at the top level, weights under "model."). Called by
// decoder_config.cc's dispatch.
//
// Read: the common decoder fields (head_dim required), `layer_types` ("linear_attention" /
// "full_attention", one per layer) or else `full_attention_interval` (default 4: layer i is full
// attention when (i + 1) is a multiple of it), the Gated DeltaNet fields `linear_num_key_heads`,
// `linear_num_value_heads` (a multiple of the key heads), `linear_key_head_dim`,
// `linear_value_head_dim`, `linear_conv_kernel_dim`, and RoPE from `rope_parameters`
// {rope_type "default", rope_theta, partial_rotary_factor (default 1), mrope_section} or, in
// older configs, top-level `rope_theta` / `partial_rotary_factor`. M-RoPE's sections rotate
// every text position by the same angles as plain RoPE over the rotary dims, so they are not
// used. The family fixes the gated attention output (`attn_output_gate` must be absent or true)
// and the zero-centred norms. Refused: sliding windows, experts in the dense family, any other
// rope_type, a rotary dim that is odd or zero.
//
// The mixture of experts (transformers' Qwen3_5MoeConfig / Qwen3_5MoeTextConfig, which builds on
// Qwen3NextConfig) has no dense MLP (intermediate_size unread) and reads `num_experts`,
// `num_experts_per_tok`, `moe_intermediate_size` and `shared_expert_intermediate_size`; every
// layer is sparse, its top k always renormalised (`decoder_sparse_step`, `mlp_only_layers` and
// `norm_topk_prob` must be absent or say so).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/status.h"
#include "io/config_fields.h"
#include "io/decoder_config.h"

namespace dscale {

// The layer types `full_attention_interval` = `every` gives `layers` layers: layer i is full
// attention when (i + 1) is a multiple of `every`, linear attention otherwise.
std::vector<LayerKind> IntervalLayerTypes(int64_t layers, int64_t every);

// `multimodal`: the …ForConditionalGeneration layout (fields under `text_config`); `moe`: the
// mixture of experts (Qwen3_5Moe…, model_type "qwen3_5_moe" / "qwen3_5_moe_text").
Status ReadQwen3_5Config(const ConfigFieldReader& reader, bool multimodal, bool moe,
                         DecoderConfig* config);
// The config.json of config.hybrid.multimodal_layout's class.
nlohmann::json Qwen3_5ConfigJson(const DecoderConfig& config);

}  // namespace dscale
