#include "model/decoder_layer.h"

namespace dscale {

MoeDims MoeDims::From(const MoeConfig& moe) {
  return {.experts = static_cast<int32_t>(moe.num_experts),
          .top_k = static_cast<int32_t>(moe.experts_per_token),
          .intermediate = moe.expert_intermediate_size,
          .normalize = moe.norm_topk_prob};
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
          .moe = MoeDims::From(c.moe)};
}

}  // namespace dscale
