#include "model/decoder_layer.h"

namespace dscale {

LayerDims LayerDims::From(const Qwen3Config& c) {
  return {.hidden = c.hidden_size,
          .intermediate = c.intermediate_size,
          .heads = static_cast<int32_t>(c.num_attention_heads),
          .kv_heads = static_cast<int32_t>(c.num_key_value_heads),
          .head_dim = static_cast<int32_t>(c.head_dim),
          .eps = static_cast<float>(c.rms_norm_eps),
          .rope_theta = c.rope_theta};
}

}  // namespace dscale
