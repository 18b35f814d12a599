#include "model/decoder_layer.h"

namespace dscale {

LayerDims LayerDims::From(const DecoderConfig& c) {
  return {.hidden = c.hidden_size,
          .intermediate = c.intermediate_size,
          .heads = static_cast<int32_t>(c.num_attention_heads),
          .kv_heads = static_cast<int32_t>(c.num_key_value_heads),
          .head_dim = static_cast<int32_t>(c.head_dim),
          .eps = static_cast<float>(c.rms_norm_eps),
          .qk_norm = c.qk_norm,
          .rope = c.rope()};
}

}  // namespace dscale
