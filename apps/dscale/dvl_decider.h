#pragma once
// The dscale length policy's row decider for the engine: draft features → acceptance
// predictor → budget allocator (Algorithm 1) with M = W·N/2 rows per step.

#include <string>

#include "core/status.h"
#include "engine/engine.h"
#include "model/dflash_drafter.h"

namespace dscale::cli {

// Loads the predictor at `path` (checked against the drafter's hidden size and the target's
// vocabulary) and returns the decider. InvalidArgument unless the drafter's block is 16.
Result<RowDecider> MakeDvlRowDecider(const std::string& path, const DFlashDrafter& drafter,
                                     int64_t vocab_size);

}  // namespace dscale::cli
