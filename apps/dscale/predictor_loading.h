#pragma once
// Loading the DVL acceptance predictor for the dscale and dspark policies, shared by generate,
// serve and bench.

#include <cstdint>
#include <string>

#include "core/status.h"
#include "dvl/predictor.h"
#include "model/dflash_drafter.h"
#include "model/domino_head.h"

namespace dscale::cli {

// The file a drafter folder ships its predictor in: predictor.bin, or predictor-domino.bin (trained
// on the Domino head's corrected drafts) for that head.
std::string BundledPredictorPath(const std::string& drafter_dir, DrafterHead head);

// `flag_value` when given; otherwise the drafter folder's bundled predictor when it exists, and
// otherwise an error naming `flag_name` and the file looked for.
Result<std::string> ResolvePredictorPath(const std::string& flag_value,
                                         const std::string& flag_name,
                                         const std::string& drafter_dir, DrafterHead head);

// Loads the predictor ResolvePredictorPath names for `drafter` (loaded from `drafter_dir`, with
// or without its head), checked against the drafter's hidden size and the target's vocabulary
// (the projections must fit the drafts they will read).
Result<dvl::Predictor> LoadDvlPredictor(const std::string& flag_value,
                                        const std::string& drafter_dir,
                                        const DFlashDrafter& drafter, int64_t target_vocab);

}  // namespace dscale::cli
