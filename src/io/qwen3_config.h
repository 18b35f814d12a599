#pragma once
// The Qwen3 family's config.json (Qwen3ForCausalLM, model_type "qwen3") and the DFlash
// drafters' transformer, whose layers are Qwen3's whatever the target. Called by
// decoder_config.cc's dispatch and dflash_config.cc.

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

}  // namespace dscale
