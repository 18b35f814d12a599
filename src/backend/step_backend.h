#pragma once
// The device-dependent stages of one decode step behind one interface, one virtual call per stage
// per step. The engine keeps request states, admission, output building and stop rules; a
// backend runs, in this order per step:
//
//   Draft → Decide (k_i and the flat-pack) → Verify (target forward) → Accept (prefix verifier)
//   → AppendContext (commit: committed rows join the draft context)
//
// Implementations (made by name with MakeBackend, backend/backend.h):
//   cpu   CpuBackend (cpu_backend.h): the host path — any TargetModel / Drafter, VerifyPlanner,
//         the host prefix verifier
//   cuda  CudaBackend (cuda_backend.cc): the models on the GPU, and the decision, verification
//         and acceptance on the device where that path exists (see there)

#include <cstdint>
#include <span>
#include <string_view>

#include "plan/verify_planner.h"
#include "core/status.h"
#include "core/step_batch.h"
#include "kv/paged_kv_cache.h"
#include "model/drafter.h"
#include "model/target_model.h"
#include "spec/prefix_verifier.h"
#include "spec/sampling.h"

namespace dscale {

// What the prefix verifier needs of request i of a step besides its rows.
struct AcceptRequest {
  const SamplingParams* sampling = nullptr;  // temperature ≤ 0: greedy
  int64_t first_position = 0;                // the position row 0 predicts (anchor's + 1)
  bool logprobs = false;  // the engine reads this request's verified logits after Accept
};

// Request i's outcome: `result` when `status` is ok; otherwise the request fails and commits
// nothing (a logit its choice rests on was not finite).
struct Acceptance {
  VerifyResult result;
  Status status;
};

class StepBackend {
 public:
  virtual ~StepBackend() = default;

  virtual std::string_view name() const = 0;  // "cpu" or "cuda"
  // The models the stages run (prefill goes through target().Forward). drafter(): null without
  // one. Both live as long as the backend.
  virtual TargetModel& target() = 0;
  virtual Drafter* drafter() = 0;

  // Draft: one block per request (Drafter::Draft's contract).
  virtual Status Draft(std::span<const DraftRequest> requests, const PagedKvCache& cache,
                       int tile_rows, DraftOutput* out) = 0;
  // Decide: k_i for the requests of `blocks` and their pack into the bucket's StepBatch
  // (VerifyPlanner::Plan's contract; the planner owns the policy and the batch).
  virtual Result<StepBatch*> Decide(VerifyPlanner& planner, const StepBatch& blocks,
                                    const DraftOutput& drafts, std::span<const uint8_t> drafted,
                                    double draft_s) = 0;
  // Verify: the target over the packed rows (TargetModel::Forward's contract): logits
  // [packed.logit_rows(), vocab] and the capture layers' residual streams into `out`, or, where
  // a backend verifies and accepts in one device pass (`requests` say how each request is
  // accepted), its own buffers; only Accept and AppendContext of the same step read them. When a
  // request asks for `logprobs`, the logits must be in `out` (the engine reads the committed rows).
  virtual Status Verify(const StepBatch& packed, std::span<const AcceptRequest> requests,
                        PagedKvCache& cache, ForwardOutput* out) = 0;
  // Accept: for span i of `packed` (rows q_start .. q_start + q_len − 1 of the verified logits,
  // the anchor then q_len − 1 drafts) and requests[i], writes outcomes[i]; `packed`, `out` and
  // `requests` are those Verify just saw. Sizes: spans().size().
  virtual void Accept(const StepBatch& packed, const ForwardOutput& out,
                      std::span<const AcceptRequest> requests, std::span<Acceptance> outcomes) = 0;
  // Commit: rows [first, first + count) of `step` join the draft context, their features from
  // `out`, the forward that ran `step`. Needs a drafter.
  virtual void AppendContext(const StepBatch& step, const ForwardOutput& out, int32_t first,
                             int32_t count) = 0;
};

}  // namespace dscale
