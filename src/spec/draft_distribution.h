#pragma once
// How a request at temperature > 0 drafts (--draft-sampling), and the drafter's distribution Q
// that `distribution` draws from: Q = softmax(draft logits / T) over a draft row's columns, T the
// request's temperature, no top-k or top-p (verification is exact for any Q; the target's
// filters act on P). The drafter draws each candidate from Q (SampleDraftColumn) and the
// distribution verifier (distribution_verifier.h) recomputes Q from the same row, so both see
// the same bits.
//
// A row with a non-finite logit (a drafter whose activations overflowed) has no Q: the drafter
// proposes the row's argmax, and the verifier tests that draft as a one-hot proposal (Q = δ),
// the argmax rule's law, exact as well.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace dscale {

// argmax: candidates are the argmax of the draft logits and a draft is accepted iff it equals
// the token plain sampling draws at its position (prefix_verifier.h, VerifySampledAt): seeded
// output equals plain sampling's token for token. distribution: candidates are drawn from Q and
// verified by speculative sampling with Q: exact in law, more drafts accepted when Q is spread
// out (high temperature), but a seeded request's tokens depend on the drafts.
enum class DraftSampling { kArgmax, kDistribution };
// "argmax" or "distribution"; errors name --draft-sampling and the choices.
Result<DraftSampling> ParseDraftSampling(std::string_view text);
std::string_view DraftSamplingName(DraftSampling mode);

// q[columns] = softmax(logits / temperature) in double (temperature > 0). False when a logit is
// not finite (*q unspecified).
bool DraftColumnDistribution(std::span<const float> logits, float temperature,
                             std::vector<double>* q);

// The column a sampled candidate takes: Q's inverse CDF at u in [0, 1) (SampleIndex, so never a
// column of probability 0), or the row's argmax (ties to the lowest column) when the row has no
// Q. `q` is scratch.
int32_t SampleDraftColumn(std::span<const float> logits, float temperature, double u,
                          std::vector<double>* q);

}  // namespace dscale
