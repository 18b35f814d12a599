#pragma once
// The device-dependent stages of a step behind one interface, one virtual call per stage per
// step. The engine keeps request states, admission, the length decision (plan/), output
// building and stop rules; a backend runs the models and chooses tokens:
//
//   Prefill (target over prompt chunks) → Accept (each finished prompt's first token)
//   Draft → [engine: decide k_i and pack] → Verify (target over the packed rows) → Accept
//   (prefix verifier) → AppendContext (committed rows join the draft context)
//
// A forward pass is a value, TargetPass, that the stages after it take: where its logits and
// captured features are (the host's ForwardOutput, or a device workspace that kept them) and,
// for a pass that also accepted on the device, its outcomes.
//
// Implementations (made by name with MakeBackend, backend/backend.h):
//   cpu   CpuBackend (cpu_backend.h): the host path — any TargetModel / Drafter and the host
//         prefix verifier
//   cuda  CudaBackend (cuda_backend.cc): the models on the GPU, and verification with acceptance
//         in one device pass where that path exists (see there)

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/step_batch.h"
#include "kv/paged_kv_cache.h"
#include "model/drafter.h"
#include "model/target_model.h"
#include "spec/distribution_verifier.h"
#include "spec/prefix_verifier.h"
#include "spec/sampling.h"

namespace dscale {

// One forward pass of the target over `rows`, as Accept and AppendContext read it.
struct TargetPass {
  const StepBatch* rows = nullptr;  // the rows the pass ran
  // A host pass: logits [rows->logit_rows(), vocab] and the capture layers' residual streams.
  const ForwardOutput* out = nullptr;
  // A device pass (device_pass ≥ 0, the backend's handle of the workspace that holds the
  // features): verification and acceptance ran together; one outcome per span of `rows`.
  int32_t device_pass = -1;
  std::vector<VerifyResult> device_results;

  bool on_device() const { return device_pass >= 0; }
};

// How request i of a step is accepted. Its logits rows in a host pass are [logits_row,
// logits_row + drafts.size()]: the target's choice after the anchor, then after each draft.
struct AcceptRequest {
  const SamplingParams* sampling = nullptr;  // temperature ≤ 0: greedy
  int64_t first_position = 0;                // the position logits row 0 predicts
  bool logprobs = false;  // the engine reads this request's logits after Accept (host pass)
  int64_t logits_row = 0;
  std::span<const int32_t> drafts;  // the candidates verified after the anchor (k − 1)
  // A sampled request whose drafts were drawn from the drafter's distribution (--draft-sampling
  // distribution): the draft rows they came from, which its acceptance tests them against
  // (spec/distribution_verifier.h). Absent (columns 0): the argmax rule, a one-hot test against
  // the token plain sampling draws at each position (VerifySampledAt).
  DraftRows draft_rows;
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
  // The models the stages run. drafter(): null without one. Both live as long as the backend.
  virtual TargetModel& target() = 0;
  virtual Drafter* drafter() = 0;

  // Prefill: the target over prompt chunks (TargetModel::Forward's contract), on the host's
  // `out`.
  virtual Result<TargetPass> Prefill(const StepBatch& chunks, PagedKvCache& cache,
                                     ForwardOutput* out) = 0;
  // Draft: one block per request (Drafter::Draft's contract).
  virtual Status Draft(std::span<const DraftRequest> requests, const PagedKvCache& cache,
                       int tile_rows, DraftOutput* out) = 0;
  // Verify: the target over the packed rows (span i: request i's anchor and k_i − 1 drafts),
  // into `out`, or, where a backend verifies and accepts in one device pass (`requests` say how
  // each request is accepted), on the device. A request asking for logprobs gets a host pass.
  virtual Result<TargetPass> Verify(const StepBatch& packed,
                                    std::span<const AcceptRequest> requests, PagedKvCache& cache,
                                    ForwardOutput* out) = 0;
  // Whether Verify takes a batch whose packed spans are followed by prompt chunks (mixed
  // prefill, EngineConfig::mixed_prefill): each with its last row's logits after the packed
  // rows' and its rows kept as Prefill's would be. A backend whose verify runs in fixed device
  // workspaces keeps prompts in passes of their own.
  virtual bool VerifyTakesPromptRows() const { return false; }
  // Whether every pass is a host pass (TargetPass::out): the engine may then hold a request's
  // committed rows and append them to its draft context later (engine/held_context.h).
  virtual bool PassesOnHost() const { return false; }
  // Accept: the outcome of each request of `pass` (sizes equal). A host pass reads each request's
  // logits rows; a device pass hands back its own outcomes (requests[i] is span i).
  virtual void Accept(const TargetPass& pass, std::span<const AcceptRequest> requests,
                      std::span<Acceptance> outcomes) = 0;
  // Commit: rows [first, first + count) of `pass` join the draft context with their features.
  // Needs a drafter.
  virtual void AppendContext(const TargetPass& pass, int32_t first, int32_t count) = 0;
};

}  // namespace dscale
