#pragma once
// The seam where a drafter plugs into the engine. The DFlash drafter implements it; tests plug
// in drafters with known behaviour (e.g. replaying a continuation with planted errors).

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "core/step_batch.h"
#include "kv/paged_kv_cache.h"
#include "spec/sampling.h"

namespace dscale {

// One request of a drafting step.
struct DraftRequest {
  int32_t seq = -1;                    // KV sequence (shared with the target)
  int32_t ctx_len = 0;                 // committed positions; the block starts here
  int32_t anchor = 0;                  // the token at position ctx_len (the last bonus token)
  std::span<const int32_t> committed;  // the ctx_len committed tokens (prompt, then output)
  // Set for a request whose candidates are drawn from the drafter's distribution rather than
  // taken as the argmax (--draft-sampling distribution, temperature > 0): candidate k is drawn
  // from softmax(its draft logits / temperature) with the draft stream's uniform at position
  // ctx_len + 1 + k (model/draft_choice.h). Null: the argmax. Outlives the call.
  const SamplingParams* sampling = nullptr;
  // How many of the block's candidates the step can read, from the first (a policy that verifies
  // at most K rows reads K − 1: LengthStrategy::CandidatesRead); 0: all W − 1. A drafter may
  // score more (the most any request of the call asks, or all), never fewer.
  int32_t candidates = 0;
};

// A drafting step's candidates: W − 1 per request for a block of W rows (anchor + candidates),
// or the first of them the requests asked for (DraftRequest::candidates). However many rows the
// drafter's own pass stages (a DSpark pass stages W − 1), candidate k proposes the token at
// ctx_len + 1 + k.
struct DraftOutput {
  int32_t candidates = 0;       // per request: block_size − 1, or fewer where all asked fewer
  std::vector<int32_t> tokens;  // [requests, candidates]
  std::vector<float> logits;    // [requests · candidates, vocab] draft logits (the distribution
                                // the candidates were drawn from: a head's corrected ones)
  // Column → target id of `logits` when the drafter drafts over a reduced vocabulary (the
  // drafter's storage); empty: the columns are the target's ids.
  std::span<const int32_t> column_ids;
  std::vector<float> hidden;    // [requests · candidates, hidden] draft hidden vectors
  // [requests, candidates] logits of a confidence head (DSpark's): σ of entry k estimates that
  // candidate k survives verification given candidates < k did. Empty without a head.
  std::vector<float> confidence;
};

// Committed rows whose target features enter the draft context.
struct ContextRows {
  std::span<const float> features;     // [rows, K · target hidden], target_layer_ids order
  std::span<const int32_t> positions;  // [rows]
  std::span<const int32_t> slots;      // [rows]
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // W: the anchor plus the candidates of one block, the rows a verification takes (what the
  // engine reserves KV positions and verify rows for; a drafter's own pass may stage fewer).
  virtual int32_t block_size() const = 0;
  // Target layers whose residual streams the drafter consumes (possibly none).
  virtual const std::vector<int32_t>& feature_layers() const = 0;
  // Prepares draft-side storage for `cache`'s slots (host rows in the cache's dtype); called once
  // before use.
  virtual void Bind(const PagedKvCache& cache) = 0;
  // Host bytes that storage takes per slot once written, for rows stored as `dtype` (0 when it
  // lives elsewhere).
  virtual int64_t KvBytesPerPosition(KvDtype dtype) const { return 0; }
  // Whether Draft fills DraftOutput::confidence (a confidence head, DSpark's).
  virtual bool has_confidence_head() const { return false; }
  // Whether Draft honours DraftRequest::sampling (else it always proposes the argmax, and the
  // engine refuses --draft-sampling distribution).
  virtual bool samples_drafts() const { return false; }
  // Whether a candidate's draft logits (and confidence) depend on the candidates before it (a
  // Domino head, a DSpark Markov head): sampled candidates then show in the rows a length policy
  // reads (EngineConfig::draft_sampling says why that matters).
  virtual bool conditions_on_candidates() const { return false; }
  virtual void AppendContext(const ContextRows& rows) = 0;
  // Every request's sequence has block_size positions reserved past ctx_len, and its anchor is in
  // the target vocabulary (CHECKed: requests are validated where they enter).
  virtual Status Draft(std::span<const DraftRequest> requests, const PagedKvCache& cache,
                       int tile_rows, DraftOutput* out) = 0;
};

// Stages each request's block [anchor, mask × (block − 1)] at positions ctx_len .. ctx_len +
// block − 1 as one span of `blocks` (non-causal, no logit rows), with the preconditions of
// Drafter::Draft CHECKed (anchors below `vocab`, block positions reserved). `block` is the rows
// the drafter's pass stages (DraftBlock::input_rows, io/dflash_config.h), at most W.
void StageDraftBlocks(std::span<const DraftRequest> requests, const PagedKvCache& cache,
                      int32_t mask_token, int32_t block, int64_t vocab, StepBatch& blocks);

// The candidates a call scores: the most any of `requests` asks for (DraftRequest::candidates),
// all `block_candidates` when one asks for all (or asks more).
int32_t CandidatesAsked(std::span<const DraftRequest> requests, int32_t block_candidates);

}  // namespace dscale
