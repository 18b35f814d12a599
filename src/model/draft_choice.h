#pragma once
// How a drafted request's candidates are chosen from their draft logits rows: the argmax, as
// drafters always did, or a draw from the drafter's own distribution Q = softmax(row / T)
// (--draft-sampling distribution; spec/draft_distribution.h), with the draft stream's uniform
// at the candidate's position, so that drafting never reads the target's uniforms and seeded
// drafts reproduce. One rule for every drafter and head: a head that proposes candidates one
// after another (Domino, DSpark's Markov walk) chooses each with Column and feeds the chosen
// token to the next row.

#include <cstdint>
#include <vector>

#include "spec/sampling.h"

namespace dscale {

struct DraftChoice {
  float temperature = 0.0f;    // ≤ 0: the argmax (ties to the lowest column)
  uint64_t seed = 0;           // the request's sampling seed
  int64_t first_position = 0;  // the position candidate 0 proposes

  // The column candidate `candidate` takes from its row of `columns` draft logits; `scratch`
  // holds Q while drawing.
  int32_t Column(const float* row, int64_t columns, int32_t candidate,
                 std::vector<double>* scratch) const;
};

// The choice for a request whose block starts at ctx_len (candidate 0 proposes ctx_len + 1):
// a draw at `sampling`'s temperature and seed, or the argmax when `sampling` is null.
DraftChoice DraftChoiceFor(const SamplingParams* sampling, int32_t ctx_len);

}  // namespace dscale
