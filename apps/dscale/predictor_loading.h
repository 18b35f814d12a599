#pragma once
// Loading the DVL acceptance predictor for the dscale policy, shared by generate and serve.

#include <cstdint>
#include <string>

#include "core/status.h"
#include "dvl/predictor.h"
#include "model/dflash_drafter.h"

namespace dscale::cli {

// Loads `path`, checked against the drafter's hidden size and the target's vocabulary (the
// projections must fit the drafts they will read). An empty path is an error naming the flag.
Result<dvl::Predictor> LoadDvlPredictor(const std::string& path, const DFlashDrafter& drafter,
                                        int64_t target_vocab);

}  // namespace dscale::cli
