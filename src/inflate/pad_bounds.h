#pragma once
// Bounds on a source pair's real logits and final residual rows, from its weights alone, so that
// the pad rows of an inflated vocabulary can be put below every real logit for any input
// (docs/INFLATE.md, "Vocabulary").

#include <string>

#include "core/status.h"
#include "inflate/inflate_plan.h"
#include "io/decoder_config.h"
#include "io/dflash_config.h"
#include "io/domino_config.h"
#include "io/dspark_config.h"
#include "io/safetensors.h"

namespace dscale {

// Reads the source target (tensor names "model.…") and drafter (`drafter_prefix` + name) once.
// Every bound holds in exact arithmetic for every input; float evaluation moves the values by
// far less than kPadLogitMargin.
Result<SourceBounds> MeasureSourceBounds(const Checkpoint& target,
                                         const DecoderConfig& target_config,
                                         const Checkpoint& drafter,
                                         const std::string& drafter_prefix,
                                         const DFlashConfig& drafter_config);

// C ≥ |every correction| a Domino head (the file `head`, tensor names as written) adds to a draft
// logit, for z rows of a final norm whose largest gain is `final_gain` (|z| < √d·final_gain):
//   |s_j| < 1 (the GRU state is a convex combination of tanh values, starting at 0), so bottleneck
//   unit b's input is at most A_b = ‖W_in,z[b]‖₂·√d·final_gain + ‖W_in,s[b]‖₁, |silu(a)| ≤ |a|,
//   and C = max_v Σ_b |W_out[v, b]|·A_b.
Result<double> MeasureCorrectionBound(const Checkpoint& head, const DominoHeadConfig& config,
                                      int64_t hidden, int64_t vocab, double final_gain);

// C ≥ |every bias a DSpark Markov head (`config`; the drafter's tensors named `prefix` + DeepSpec's
// names) adds to a draft logit: W2's input x has |x_i| ≤ X_i = max_t |W1[t, i]| (vanilla:
// x = W1[prev]; gated: σ(·) ⊙ W1[prev], 0 < σ < 1) or X_i = 1 (rnn: x = tanh(·)), so
// C = max_v Σ_i |W2[v, i]|·X_i. 0 without a Markov head.
Result<double> MeasureMarkovBiasBound(const Checkpoint& drafter, const std::string& prefix,
                                      const DSparkHeadConfig& config, int64_t vocab);

}  // namespace dscale
