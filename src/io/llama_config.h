#pragma once
// The Llama 3.x family's config.json (LlamaForCausalLM, model_type "llama"): no q/k norms,
// head_dim implied by hidden_size / num_attention_heads when absent, RoPE unscaled or scaled by
// rope_scaling {"rope_type": "llama3", factor, low_freq_factor, high_freq_factor,
// original_max_position_embeddings}. Called by decoder_config.cc's dispatch.

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "io/config_fields.h"
#include "io/decoder_config.h"

namespace dscale {

Status ReadLlamaConfig(const ConfigFieldReader& reader, DecoderConfig* config);
nlohmann::json LlamaConfigJson(const DecoderConfig& config);

// `rope_scaling`: null/absent (kNone) or a "llama3" object, every field checked (factor ≥ 1,
// 0 < low_freq_factor < high_freq_factor, a positive original context no larger than
// max_position_embeddings); any other rope_type is refused by name. Also used for drafters.
Status ReadRopeScaling(const ConfigFieldReader& reader, DecoderConfig* config);
// null for kNone, the llama3 object otherwise.
nlohmann::json RopeScalingJson(const RopeScaling& scaling);

}  // namespace dscale
