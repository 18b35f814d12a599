#pragma once
// Finding and checking the DVL acceptance predictor for the dscale and dspark policies, and the
// confidence head's calibration for dspark over a DSpark drafter; runtime.h loads them with these
// for generate, serve and bench.

#include <cstdint>
#include <optional>
#include <string>

#include "budget/confidence_survival.h"
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

// The hidden size and vocabulary a predictor for `drafter` must be built for: the drafter's
// hidden size and the columns of its draft logits (the target's vocabulary, or the size of its
// draft subset).
dvl::DrafterDims PredictorDimsFor(const DFlashDrafter& drafter);

// Predictor::Load(path, PredictorDimsFor(drafter)), its errors naming the file and, for a
// vocabulary that does not match, which vocabulary the drafter drafts over (full or subset) and
// the flag that chooses it; its logit projection folded through the drafter's head (below).
Result<dvl::Predictor> LoadPredictorFor(const std::string& path, const DFlashDrafter& drafter);

// The rows of `drafter`'s LM head as f32 (as it holds them: BF16, int8, a draft vocabulary's
// rows), for folding the features' logit projection through the head (dvl::FoldLogitProjection),
// where its draft logits are that head's output on the hidden vectors the features read; none
// where a Domino or Markov head corrects them. Every predictor the runtime loads and every trace
// `collect` writes is folded with it, so that training and serving compute the features alike.
std::optional<dvl::HeadRows> LinearHeadRows(const DFlashDrafter& drafter);

// The STS temperatures for `drafter`'s confidence head: the file `flag_value` names, else the
// drafter folder's confidence_calibration.json when it exists, else none (uncalibrated: the
// strategy says so). Errors name the file; the temperatures must be one per candidate.
Result<std::optional<budget::ConfidenceCalibration>> LoadConfidenceCalibrationFor(
    const std::string& flag_value, const std::string& drafter_dir, const Drafter& drafter);

}  // namespace dscale::cli
