#pragma once
// Speculative sampling with the drafter's distribution (--draft-sampling distribution): a
// request's drafts d_1 .. d_{k−1} were drawn from Q_j = softmax(draft logits_j / T)
// (draft_distribution.h), and the target's rows [anchor, d_1 .. d_{k−1}] give P_j, the target
// distribution of sampling.h (temperature, top-k, top-p) exactly as plain sampling's. Row j,
// at position p_j = first_position + j, tests d = d_{j+1}:
//   accept with probability min(1, P_j(d) / Q_j(d)):  A(p_j) · Q_j(d) < P_j(d);
//   at the first rejection, the next token is drawn from norm(max(0, P_j − Q_j)) with U(p_j);
//   when all k − 1 pass, the next token is drawn from P_{k−1} with U(p_{k−1}).
// Each committed token is then distributed as P given the tokens before it (Leviathan et al.,
// Chen et al., 2023), and a draft is accepted with probability Σ_x min(P_j(x), Q_j(x)), where the
// one-hot argmax rule (prefix_verifier.h) accepts with P_j(argmax Q_j).
//
// Uniforms: U is the token stream plain sampling draws with, A the acceptance stream, and the
// drafter draws d at p with the draft stream: StreamUniform(seed, p, ·) (position_uniform.h).
// Each is read once per position a request commits, so seeded runs reproduce; but the tokens
// depend on the drafts (unlike the argmax rule's), so on the policy and the rows verified — only
// their law is plain sampling's.
//
// The law holds when whether a draft is verified never depends on that draft itself: the
// engine keeps it so (engine.h, EngineConfig::draft_sampling).
//
// Edge cases: a sampled draft has Q_j(d) > 0 (CHECKed: the drafter never draws a column of
// probability 0); a rejection needs P_j(d) < Q_j(d), so the residual has mass wherever P_j ≠ Q_j
// and P_j == Q_j never rejects (if rounding leaves the residual without mass, the token is drawn
// from P_j); a draft row without Q (a non-finite logit) is tested one-hot, Q_j = δ_d.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/status.h"
#include "spec/position_uniform.h"
#include "spec/prefix_verifier.h"
#include "spec/sampling.h"

namespace dscale {

// The draft rows a request's drafts were drawn from, as its acceptance reads them.
struct DraftRows {
  std::span<const float> logits;        // [≥ drafts, columns]: row j is what drafts[j] came from
  int64_t columns = 0;                  // 0: no rows (the argmax rule applies)
  std::span<const int32_t> column_ids;  // column → target id (a reduced draft vocabulary);
                                        // empty: the identity (columns = the target's vocab)

  bool present() const { return columns > 0; }
};

// Q_j over the target's `vocab` ids (0 outside a reduced vocabulary) at temperature T, into *q;
// one-hot at `draft` when the row has no Q. `columns` is scratch.
void DraftTargetDistribution(const DraftRows& rows, size_t row, float temperature, int64_t vocab,
                             int32_t draft, std::vector<double>* columns, std::vector<double>* q);

// Scratch reused across calls.
struct DistributionScratch {
  std::vector<double> p, q, columns;
};

// Where the rule reads its uniforms: u(stream, position) in [0, 1).
using StreamUniformSource = std::function<double(UniformStream stream, int64_t position)>;

// The rule above. logits: [k, vocab] target rows; drafts: the k − 1 candidates; first_position:
// the position row 0 predicts. Fails, like VerifySampledAt, when a target row it draws from has
// a non-finite logit.
Result<VerifyResult> VerifyWithDraftDistribution(std::span<const float> logits, int64_t vocab,
                                                 std::span<const int32_t> drafts,
                                                 const DraftRows& rows,
                                                 const SamplingParams& params,
                                                 int64_t first_position,
                                                 const StreamUniformSource& uniform,
                                                 DistributionScratch* scratch);

// The engine's form: uniforms StreamUniform(seed, position, stream).
Result<VerifyResult> VerifyWithDraftDistributionAt(std::span<const float> logits, int64_t vocab,
                                                   std::span<const int32_t> drafts,
                                                   const DraftRows& rows,
                                                   const SamplingParams& params, uint64_t seed,
                                                   int64_t first_position,
                                                   DistributionScratch* scratch);

}  // namespace dscale
