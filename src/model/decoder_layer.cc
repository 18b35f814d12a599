#include "model/decoder_layer.h"

namespace dscale {

MoeDims MoeDims::From(const MoeConfig& moe) {
  return {.experts = static_cast<int32_t>(moe.num_experts),
          .top_k = static_cast<int32_t>(moe.experts_per_token),
          .intermediate = moe.expert_intermediate_size,
          .normalize = moe.norm_topk_prob};
}

LinearDims LinearDims::From(const GatedDeltaNetConfig& l) {
  return {.key_heads = static_cast<int32_t>(l.key_heads),
          .value_heads = static_cast<int32_t>(l.value_heads),
          .key_dim = static_cast<int32_t>(l.key_head_dim),
          .value_dim = static_cast<int32_t>(l.value_head_dim),
          .conv_kernel = static_cast<int32_t>(l.conv_kernel)};
}

LayerDims LayerDims::From(const DecoderConfig& c) {
  return {.hidden = c.hidden_size,
          .intermediate = c.intermediate_size,
          .heads = static_cast<int32_t>(c.num_attention_heads),
          .kv_heads = static_cast<int32_t>(c.num_key_value_heads),
          .head_dim = static_cast<int32_t>(c.head_dim),
          .eps = static_cast<float>(c.rms_norm_eps),
          .qk_norm = c.qk_norm,
          .rope = c.rope(),
          .moe = MoeDims::From(c.moe),
          .linear = LinearDims::From(c.hybrid.linear),
          .output_gate = c.hybrid.attention_output_gate};
}

}  // namespace dscale
