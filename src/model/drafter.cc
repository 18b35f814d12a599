#include "model/drafter.h"

#include <algorithm>

#include "core/check.h"

namespace dscale {

void StageDraftBlocks(std::span<const DraftRequest> requests, const PagedKvCache& cache,
                      int32_t mask_token, int32_t block, int64_t vocab, StepBatch& blocks) {
  blocks.Clear();
  blocks.causal = false;
  blocks.EnsureCapacity(static_cast<int32_t>(requests.size()) * block,
                        static_cast<int32_t>(requests.size()));
  for (const DraftRequest& r : requests) {
    DSCALE_CHECK_MSG(r.anchor >= 0 && r.anchor < vocab, "draft anchor outside the vocabulary");
    DSCALE_CHECK_MSG(cache.Length(r.seq) >= r.ctx_len + block, "draft block not reserved");
    blocks.BeginSpan(r.seq, r.ctx_len, cache.PageTable(r.seq).data());
    for (int32_t j = 0; j < block; ++j) {
      blocks.AddRow(j == 0 ? r.anchor : mask_token, cache.Slot(r.seq, r.ctx_len + j),
                    /*logits=*/false);
    }
  }
}

int32_t CandidatesAsked(std::span<const DraftRequest> requests, int32_t block_candidates) {
  if (requests.empty()) return block_candidates;
  int32_t asked = 1;
  for (const DraftRequest& r : requests) {
    if (r.candidates <= 0 || r.candidates >= block_candidates) return block_candidates;
    asked = std::max(asked, r.candidates);
  }
  return asked;
}

}  // namespace dscale
