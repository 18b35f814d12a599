#pragma once
// The prefix verifier: given the target's logits for a request's verified rows
// [anchor, d_1 .. d_{k−1}] (row j predicts the token after row j's input), decide how many
// drafts are accepted and the next token. Lossless in both modes:
// - greedy: accept d_{j+1} while it equals row j's argmax; the next token is the argmax of the
//   first mismatching row (or of row k−1 when every draft passes);
// - sampling: accept the one-hot draft x = d_{j+1} with probability P_j(x); on the first
//   rejection sample from P_j with x removed and renormalised; if all k−1 pass, sample from
//   P_{k−1}. The output is distributed exactly as plain sampling from P.
//
// Sampled verification consumes one uniform per acceptance test and one for the final draw:
// k uniforms when every draft passes, j + 2 when d_{j+1} is the first rejected — so at most k.
//
// VerifySampledAt is the same test with position-indexed uniforms (position_uniform.h), the form
// the engine uses: row j's token t_j = SampleIndex(P_j, U(seed, first_position + j)) is what
// plain sampling emits there, d_{j+1} is accepted iff it equals t_j, and on the first mismatch
// t_j is the next token. For a drafted token x (one-hot, as DFlash drafts are) that accepts x
// with probability P_j(x) and otherwise yields P_j without x renormalised — the law above — but
// the emitted tokens are exactly plain sampling's at those uniforms, whatever k is.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "spec/sampling.h"

namespace dscale {

struct VerifyResult {
  int32_t accepted = 0;    // drafts accepted, 0 .. k−1
  int32_t next_token = 0;  // the target's token after the accepted prefix (the new anchor)
};

// logits: [k, vocab] row-major; drafts: the k−1 candidates after the anchor.
VerifyResult VerifyGreedy(std::span<const float> logits, int64_t vocab,
                          std::span<const int32_t> drafts);
// VerifyGreedy, failing when a logit a choice rests on is not finite (CheckGreedyChoice).
Result<VerifyResult> VerifyGreedyChecked(std::span<const float> logits, int64_t vocab,
                                         std::span<const int32_t> drafts);

// Where sampled verification takes its uniforms in [0, 1), one call each, in consumption
// order: a request's RequestRng, its UniformLookahead, or uniforms drawn earlier and replayed.
using UniformSource = std::function<double()>;

// `probs` is scratch reused across calls.
VerifyResult VerifySampled(std::span<const float> logits, int64_t vocab,
                           std::span<const int32_t> drafts, const SamplingParams& params,
                           const UniformSource& next_uniform, std::vector<double>* probs);

// The sampled test with the token at row j drawn with PositionUniform(seed, first_position + j);
// first_position is the position row 0 predicts (the anchor's position + 1). Fails when a row it
// draws from has a non-finite logit (MakeTargetDistribution).
Result<VerifyResult> VerifySampledAt(std::span<const float> logits, int64_t vocab,
                                     std::span<const int32_t> drafts, const SamplingParams& params,
                                     uint64_t seed, int64_t first_position,
                                     std::vector<double>* probs);

// The same, drawing from the request's own stream.
inline VerifyResult VerifySampled(std::span<const float> logits, int64_t vocab,
                                  std::span<const int32_t> drafts, const SamplingParams& params,
                                  RequestRng& rng, std::vector<double>* probs) {
  return VerifySampled(
      logits, vocab, drafts, params, [&rng] { return rng.Uniform(); }, probs);
}

}  // namespace dscale
