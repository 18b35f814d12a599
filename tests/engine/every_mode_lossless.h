#pragma once
// The greedy losslessness check a target family joins with: every policy at c = 1 and 16 against
// plain greedy decoding, token for token.

#include "model/decoder_model.h"
#include "model/drafter.h"

namespace dscale::testing {

// 24 random prompts × 20 tokens (stopping at the config's EOS): the engine's output under none,
// dflash (a random DFlash drafter and the planted one), fixed:4, fixed:16, dscale at 0.5 and
// auto, and dspark, each at c = 1 and 16, equals GreedyDecode's; every KV page is free after
// each run, and the planted drafter's drafts are accepted (τ > 1.5) where the budget is fixed;
// the prompts admitted while others decode ride in verify passes (mixed prefill).
// With `drafter` (made for `target`; a DSpark drafter, say) every one of those policies drafts
// with it instead; its block_size() must be 16 (fixed:16 and the DVL predictor's policies), and
// where the budget is fixed its drafts must be accepted at τ > `min_tau` (0: not checked).
void ExpectEveryModeEqualsPlainDecoding(DecoderModel& target, Drafter* drafter = nullptr,
                                        double min_tau = 0.0);

}  // namespace dscale::testing
