#pragma once
// DVL predictor features (paper Eq. features): 1735 floats per request, built from the
// drafter's 15 new draft rows before verification.
//
//   [   0,  270)  confidence: per draft position j = 1..15 (draft order), 18 values
//                 [top logit, top − rank_r logit for r = 2..16, log-softmax of the top token,
//                  entropy of the softmax (nats)]
//   [ 270, 1230)  hiddenProj: per position, draft final hidden vector · P_hidden → 64
//   [1230, 1710)  logitProj: per position, (logits − mean(logits)) · P_logit → 32 (where the
//                 logits are the drafter's LM head applied to the hidden vector, computed from
//                 that vector instead: FoldLogitProjection)
//   [1710, 1735)  batchContext: [N, 0, 0, 1, 0 × 21]
//
// The two fixed projection matrices are generated once from a seed (see MakeProjections) and
// then travel inside the predictor file, so training and serving see identical features.

#include <cstdint>
#include <functional>
#include <vector>

#include "core/dvl_shapes.h"

namespace dscale::dvl {

// The fixed random projections for one drafter (its hidden size and vocabulary).
struct Projections {
  int64_t hidden_size = 0;  // drafter hidden width H
  int64_t vocab_size = 0;   // drafter vocabulary V
  uint64_t seed = 0;
  std::vector<float> hidden;  // [H, 64] row-major: proj = h · hidden
  std::vector<float> logit;   // [V, 32] row-major: proj = (x − mean x) · logit
  // 1ᵀ·logit in double [32], derived once from `logit` (by whoever sets it, through
  // SetLogitColumnSums) so the centring of every decode step's features costs no pass over V.
  std::vector<double> logit_column_sum;
  // The centred logit projection folded through the running drafter's LM head [H, 32]
  // (FoldLogitProjection), or empty. Derived at load for one drafter; no file stores it.
  std::vector<float> head_logit;
};

// Fills p.logit_column_sum from p.logit; call after setting or changing p.logit.
void SetLogitColumnSums(Projections& p);

// Writes rows first .. first + count − 1 of an LM head W [V, H] as f32 into out [count, H].
using HeadRows = std::function<void(int64_t first, int64_t count, float* out)>;

// Folds the centred logit projection through a drafter's LM head: where the draft logits are
// x = W·h (W [V, H], h the final hidden vector the hidden block projects), (x − mean(x))·P =
// h·F with F = Wᵀ·(P − 1·(1ᵀP)/V), so the logit block costs H · 32 multiply-adds a position
// instead of a pass over V logits and V · 32 (at Qwen3's 151,936 tokens, 60% of the features'
// time). The same value in exact arithmetic; in floats it differs from the pass over the
// computed logits by their rounding (the LM head's, and its activations' where rounded to BF16):
// a feature that only chooses rows. Sets p.head_logit (F accumulated in double over blocks of
// rows, each an f32 product). Only for a drafter whose logits are exactly its LM head's output
// (no head correcting them).
void FoldLogitProjection(Projections& p, const HeadRows& head_rows);

// Builds the projections for (hidden_size, vocab_size) from `seed`. Entries are independent
// N(0, 1/in) with in = H for the hidden matrix and in = V for the logit matrix, drawn in
// row-major order from DeterministicRandom streams seeded with SplitMix64Mix(seed) (hidden)
// and SplitMix64Mix(seed ^ 1) (logit), then rounded to f32. The result depends only on the
// three arguments (and on the platform's double log/sin/cos, which is why the matrices are
// stored in the predictor file rather than regenerated at serve time).
Projections MakeProjections(int64_t hidden_size, int64_t vocab_size, uint64_t seed);

// The 18 confidence values of one draft position. `logits` is one row of length vocab
// (vocab ≥ 16). Exposed for tests; Extract* below call it.
void ConfidenceFeatures(const float* logits, int64_t vocab, float* out18);

// Features of one request.
//   logits: [15, V] f32 row-major, the draft logits of the 15 new positions in draft order
//   hidden: [15, H] f32 row-major, the drafter's final hidden vectors of those positions
//   live_count: N, the number of live requests in this step
//   out: [1735]
// Work is O(15 · (V · 32 + H · 64)), or O(15 · (V + H · 96)) with proj.head_logit; the top-16
// ranks come from a partial selection and the projections from one matrix product per batch
// (OpenBLAS).
void ExtractFeatures(const float* logits, const float* hidden, int64_t live_count,
                     const Projections& proj, float* out);

// Features of n requests: logits [n, 15, V], hidden [n, 15, H], out [n, 1735]. Confidence
// rows run on the OpenMP threads for large batches; the projections are one product over all
// n · 15 rows. The scratch is per calling thread, so concurrent calls with distinct `out` are
// safe.
void ExtractFeaturesBatch(const float* logits, const float* hidden, int64_t n, int64_t live_count,
                          const Projections& proj, float* out);

}  // namespace dscale::dvl
