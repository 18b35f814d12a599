#pragma once
// One decode step's state: what each stage reads and writes, from the choice of requests to
// the commit. The engine keeps one and reuses its buffers step to step.

#include <cstdint>
#include <vector>

#include "backend/step_backend.h"
#include "core/step_batch.h"
#include "engine/request_state.h"
#include "model/drafter.h"

namespace dscale {

// Seconds each decode stage took this step (the engine's timer around the stages).
struct StageSeconds {
  double draft = 0;
  double decide = 0;
  double verify = 0;
  double accept = 0;
  double commit = 0;
  double feed = 0;  // committed rows joining the draft context
};

struct DecodeStep {
  std::vector<RequestState*> requests;  // [N] the decoding requests, in batch order
  std::vector<uint8_t> drafted;         // [N] 1: drafted this step
  int32_t fed_count = 0;                // requests that could draft (a draft context, tokens left)
  int32_t drafted_count = 0;
  std::vector<RequestState*> drafting;   // the drafted requests, in batch order
  DraftOutput drafts;                    // the drafted requests' blocks, in batch order
  StepBatch blocks;                      // span i: [anchor, candidates…] of request i
  const StepBatch* packed = nullptr;     // the decision: span i holds request i's k_i rows
  std::vector<AcceptRequest> accepting;  // [N] how each request is accepted
  TargetPass pass;                       // the verification
  std::vector<Acceptance> outcomes;      // [N]
  std::vector<int32_t> committed_rows;   // [N] rows committed (a_i + 1; 0 for a failed request)
  // Rows appended to the draft context this step: committed ones, and held ones released
  // (RequestState::held_context; rows held this step are not counted).
  int64_t fed_rows = 0;
  // Mixed prefill: the prompt rows that ran in this step's verify pass after the packed rows
  // (its verify time is not the verify's alone).
  int64_t prompt_rows = 0;
  double experts_per_layer = 0;          // a mixture of experts: distinct experts the verify woke
  StageSeconds seconds;

  int32_t size() const { return static_cast<int32_t>(requests.size()); }
  // Empties the step for the next one (buffers keep their capacity).
  void Reset() {
    requests.clear();
    drafted.clear();
    fed_count = 0;
    drafted_count = 0;
    drafting.clear();
    packed = nullptr;
    accepting.clear();
    pass = {};
    outcomes.clear();
    committed_rows.clear();
    fed_rows = 0;
    prompt_rows = 0;
    experts_per_layer = 0;
    seconds = {};
  }
};

}  // namespace dscale
