#pragma once
// Bounds on a source pair's real logits and final residual rows, from its weights alone, so that
// the pad rows of an inflated vocabulary can be put below every real logit for any input
// (docs/INFLATE.md, "Vocabulary").

#include <string>

#include "core/status.h"
#include "inflate/inflate_plan.h"
#include "io/dflash_config.h"
#include "io/qwen3_config.h"
#include "io/safetensors.h"

namespace dscale {

// Reads the source target (tensor names "model.…") and drafter (`drafter_prefix` + name) once.
// Every bound holds in exact arithmetic for every input; float evaluation moves the values by
// far less than kPadLogitMargin.
Result<SourceBounds> MeasureSourceBounds(const Checkpoint& target, const Qwen3Config& target_config,
                                         const Checkpoint& drafter,
                                         const std::string& drafter_prefix,
                                         const DFlashConfig& drafter_config);

}  // namespace dscale
