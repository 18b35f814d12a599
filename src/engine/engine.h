#pragma once
// The engine: request states, FIFO admission under max_running and KV capacity, chunked
// prefill, continuous batching, and one step pipeline shared by every length policy. Step()
// runs these stages, in this order, each a member function of its name:
//
//   Admit          queued requests that fit (max_running, KV pages) start running
//   Prefill        prompt chunks through the target in a pass of their own, when no request
//                  decodes this step (or mixing is off); a finished prompt's first token is
//                  accepted from its last row's logits
//   SelectDecoding the requests that decode this step, and which of them draft (DecodeStep)
//   Draft          one DFlash block per drafting request
//   Decide         rows k_i per request (the length policy) packed into the bucket's batch
//   Verify         the target over the packed rows (tile-routed), and, mixed prefill, this
//                  step's prompt chunks after them in the same pass: one read of the weights
//                  serves both (what a prompt costs a running fleet is its own arithmetic)
//   Accept         prefix verifier: accepted a_i and the next token per request; then the
//                  prompt chunks that rode in the pass finish as Prefill's would
//   Commit         outputs, stop rules, logprobs, streaming
//   FeedCommitted  the committed rows join the draft context
//   Learn          counters, and the planner's record of the step's cost
//   Retire         finished requests free their KV and are reported
//
// The stages that depend on where the models run (prefill, draft, verify, accept, the draft
// context append) go through a StepBackend (backend/step_backend.h), one call per stage per step;
// the decision is the planner's (plan/). A timer around each stage fills the step-time breakdown.
//
// KV admission: a request is admitted only when pages for prompt + max_tokens + W − 2 positions
// (engine/kv_budget.h, KvPositionsForRequest) are free, and keeps them until it finishes, so a
// running request never runs out of KV; the queue waits instead. Single-threaded: one thread owns
// the engine (the server posts to it).

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/step_backend.h"
#include "budget/step_time_source.h"
#include "core/status.h"
#include "engine/decode_step.h"
#include "engine/request.h"
#include "engine/request_state.h"
#include "engine/step_stats.h"
#include "engine/step_trace.h"
#include "kv/paged_kv_cache.h"
#include "model/drafter.h"
#include "model/target_model.h"
#include "plan/planner_config.h"
#include "plan/verify_planner.h"
#include "spec/draft_distribution.h"
#include "spec/json_token_mask.h"
#include "spec/length_policy.h"

namespace dscale {

// What a decode step decided and verified, for observers (e.g. trace collection).
struct StepRecord {
  int64_t step = 0;                     // decode step index
  std::span<const RequestId> ids;       // the N requests, in draft order
  const DraftOutput* drafts = nullptr;  // their drafts (null for the anchor-only policy)
  std::span<const int32_t> rows;        // k_i verified
  std::span<const int32_t> accepted;    // a_i accepted
};

// The most requests one engine runs at once (EngineConfig::max_running): the largest request
// bucket of the flat-pack (dvl/flat_pack.h, BucketConfig).
inline constexpr int32_t kMaxRunningRequests = 64;

struct EngineConfig {
  LengthPolicy policy;
  int32_t max_running = 16;     // c: running requests at most (1 .. kMaxRunningRequests)
  int32_t page_size = 16;       // KV positions per page
  int64_t kv_tokens = 1 << 16;  // KV capacity in positions (rounded up to pages)
  // How the host caches (the target's and the drafter's) store K/V.
  KvDtype kv_dtype = KvDtype::kBf16;
  // Automatic prefix caching (kv/prefix_index.h): a prompt starting with the tokens of full
  // pages an earlier request wrote shares those pages instead of prefilling them again.
  bool prefix_cache = false;
  // A hybrid target's prefix caching: the recurrent states kept after published pages, at most
  // (each RecurrentStateShape::BytesPerSequence; kv/recurrent_snapshots.h).
  int32_t prefix_cache_states = 16;
  int32_t prefill_chunk = 512;    // prompt rows per request per step
  int32_t prefill_budget = 2048;  // prompt rows per step over all requests
  bool tile_routing = true;       // 16-row tile for verification/drafting; off: 128 everywhere
  // Mixed prefill: where the backend can (StepBackend::VerifyTakesPromptRows), a step in which
  // some request decodes runs its prompt chunks in the verify's pass rather than in a pass of
  // their own. Outputs are the same bits either way (every kernel gives a row the same bits
  // whatever rows share its pass); off: every prompt chunk runs alone, before the decode step.
  bool mixed_prefill = true;
  // A mixture of experts: a prompt's pass reads nearly every expert whatever its rows, so two
  // prompts in one pass cost little more than one. Pending prompts wait at most this many decode
  // steps while a running request will finish within them (its max_tokens says so), so that the
  // request that takes the freed slot prefills with them; 0: prompts never wait. Dense targets
  // never wait. Outputs are the same bits either way.
  int32_t prompt_wait_steps = 4;
  // How requests at temperature > 0 draft and are verified (greedy ones are unaffected):
  //   kArgmax        argmax drafts, each accepted iff it is the token plain sampling draws at its
  //                  position: a seeded request's tokens are plain sampling's, whatever the
  //                  policy, budget or concurrency;
  //   kDistribution  drafts drawn from the drafter's distribution Q and verified by speculative
  //                  sampling with it (spec/distribution_verifier.h): exact in law, more drafts
  //                  accepted where the target's distribution is spread out, but a seeded
  //                  request's tokens depend on the drafts.
  // The law holds only if whether a draft is verified never depends on that draft given the
  // ones before it. A policy's lengths are a function of the draft rows (dscale, dspark: the
  // predictor's features or the confidence head read them); a Domino or Markov head computes
  // each row from the drafts before it (Drafter::conditions_on_candidates), so there the lengths
  // would follow the sampled drafts: Create refuses that pairing, and a drafter that cannot
  // sample (the CUDA backend's).
  DraftSampling draft_sampling = DraftSampling::kArgmax;
  // What `policy` decides from besides the drafts (plan/planner_config.h says which policy
  // needs what; Create checks it).
  PolicyInputs inputs;
  // True: a block holds no more rows than the tokens its request may still commit, and a request
  // with one token left is not drafted (rows past the output's end commit nothing). False: every
  // drafted block keeps its rows to the end and every fed request drafts, for `collect`, whose
  // traces label whole blocks by the drafts the target accepts (a cut block would censor them).
  bool cut_blocks_at_output_end = true;
  // Called after every decode step's acceptance, on the engine thread.
  std::function<void(const StepRecord&)> on_step;
  // Where every decode step's line goes (engine/step_trace.h); null: none. Not owned: it
  // outlives the engine.
  StepTrace* step_trace = nullptr;
  // The bytes token `id` adds to an output's text (empty for a token that adds none), which stop
  // strings are found in (engine/stop_strings.h); unset: stop strings are rejected at submit.
  std::function<std::string_view(int32_t id)> token_text;
};

// EngineConfig::draft_sampling's conditions on the drafter `backend` runs for `policy` and on
// the policy (above); InvalidArgument naming the flag. Create checks them; the benchmark checks
// its modes with it before any runs.
Status CheckDraftSampling(DraftSampling sampling, const LengthPolicy& policy,
                          StepBackend& backend);

class Engine {
 public:
  // The step's stages run on `backend` (backend/backend.h), which must outlive the engine; its
  // drafter may be null only for the none policy.
  // `step_times`: where --verify-budget auto reads the step's times (null: the clock); tests
  // plant a simulated pair's (outputs are unaffected, only auto's choices of rows). It must
  // outlive the engine.
  static Result<std::unique_ptr<Engine>> Create(StepBackend& backend, EngineConfig config,
                                                const budget::StepTimeSource* step_times = nullptr);
  // The host stages (CpuBackend) over `target` and `drafter`, which must outlive the engine.
  static Result<std::unique_ptr<Engine>> Create(TargetModel& target, Drafter* drafter,
                                                EngineConfig config,
                                                const budget::StepTimeSource* step_times = nullptr);
  ~Engine();

  // A request's one validation, where it enters: an empty prompt, ids outside the vocabulary,
  // max_tokens < 1, bad sampling parameters or stop strings (InvalidArgument), and prompt +
  // max_tokens past MaxRequestTokens (OutOfRange: "prompt: ..." when the prompt leaves no room
  // for one output token, else "max_tokens: must be at most N: ...", saying whether the context
  // or the KV cache binds). The only check of a request's length: the server fills a missing
  // max_tokens from MaxRequestTokens and leaves the verdict here. Every message starts with the
  // request field it concerns and ": ", which the server reports as the error's `param`. Reads only
  // what is fixed at creation, so other threads may call it while the owning thread steps (the
  // server validates on HTTP threads).
  Status CheckRequest(std::span<const int32_t> prompt, const GenerationParams& params) const;
  // The largest prompt + max_tokens CheckRequest accepts: the context length, or less when the
  // KV cache cannot hold that much for one request (kv/kv_budget.h, KvPositionsForRequest).
  int64_t MaxRequestTokens() const;
  // The in-process entry: CheckRequest, then SubmitChecked.
  Result<RequestId> Submit(std::vector<int32_t> prompt, GenerationParams params);
  // Queues a request that passed CheckRequest where it entered (precondition; the server checks
  // on its HTTP threads).
  RequestId SubmitChecked(std::vector<int32_t> prompt, GenerationParams params);
  // Marks a queued or running request cancelled; its KV is freed at the next step.
  void Cancel(RequestId id);

  // Runs one step (admission, prefill chunks, one decode step). False when there was nothing
  // to do.
  Result<bool> Step();
  // Steps until every submitted request has finished.
  Status RunToCompletion();
  // Finished requests since the last call, in finishing order.
  std::vector<RequestResult> TakeFinished();

  int32_t queued() const { return static_cast<int32_t>(queue_.size()); }
  int32_t running() const { return static_cast<int32_t>(running_.size()); }
  int32_t block_size() const { return block_; }  // W (1 without a drafter)
  int32_t free_kv_pages() const { return cache_.free_pages(); }
  int32_t total_kv_pages() const { return cache_.shape().num_pages; }
  // A hybrid target's recurrent states kept for the prefix cache (kv/recurrent_snapshots.h).
  int32_t prefix_cache_states() const { return cache_.recurrent_snapshots(); }
  const StepStats& stats() const { return stats_; }
  const EngineConfig& config() const { return config_; }

 private:
  static Result<std::unique_ptr<Engine>> Create(StepBackend& backend,
                                                std::unique_ptr<StepBackend> owned,
                                                EngineConfig config,
                                                const budget::StepTimeSource* step_times);
  Engine(StepBackend& backend, std::unique_ptr<StepBackend> owned, EngineConfig config,
         int32_t block, VerifyPlanner planner);

  // The stages of Step, in order (engine.cc: admission and retirement; step_stages.cc: the
  // rest). Each decode stage reads and writes step_.
  void Admit();
  // Queued requests marked cancelled end (kCancelled) and leave the queue.
  void FinishCancelledInQueue();
  // Whether r's group (GenerationParams::group) already runs its share of max_running.
  bool GroupAtShare(const RequestState& r) const;
  // Reserves r's KV pages (sharing cached prompt pages) and sets it up to run; false, with
  // nothing changed, when the free pages are too few.
  bool TryStart(RequestState& r);
  // Whether this step's prompt chunks ride in its verify pass (EngineConfig::mixed_prefill,
  // a backend that can, a prompt to prefill and a request that decodes).
  bool MixesPrompts() const;
  // Whether this step's pending prompts wait (EngineConfig::prompt_wait_steps): counts the wait
  // when they do.
  bool PromptWaitsForCompany();
  // The step's prompt chunks (up to prefill_chunk rows per request, prefill_budget in all):
  // their requests and rows into prompt_requests_ / prompt_rows_, nothing else changed.
  void PlanPromptChunks();
  // Those chunks into prefill_; the requests' `prefilled` moves past them.
  void GatherPromptChunks();
  // Gather and run the chunks in a pass of their own, then FinishPromptChunks.
  Status Prefill();
  // After the pass that ran prefill_ as its spans from `first_span` on, each with its one logits
  // row (its last row's) from `first_logits_row` on: the rows are kept (hybrid state), join the
  // draft context, and a finished prompt's first token is accepted and committed.
  void FinishPromptChunks(const TargetPass& pass, int32_t first_span, int64_t first_logits_row);
  // Chooses the requests that decode this step and which of them draft, with the rows of the
  // prompt chunks riding in its verify pass (empty: none); false: none decodes.
  bool SelectDecoding(std::span<const int32_t> prompt_chunks);
  Status Draft();
  Status Decide();
  Status Verify();
  // The rows Verify's pass runs (the packed batch, or mixed_ in a mixed step).
  const StepBatch& PassRows();
  void Accept();
  // Acceptance of a host pass's rows: first each request's logit rules (spec/logit_rules.h) on
  // its rows of out_, row j after its tokens and drafts 0 .. j − 1, then the backend's test.
  void AcceptRows(const TargetPass& pass, std::span<RequestState* const> requests,
                  std::span<const AcceptRequest> accepting, std::span<Acceptance> outcomes);
  // A mixed step's prompt chunks finish (FinishPromptChunks) after the packed spans of its pass.
  void FinishMixedPrompts();
  void Commit();
  void FeedCommitted();
  // The step's counters, the planner's record of what the step cost and committed, observers.
  void Learn();
  // Shows the step to config_.on_step (called by Learn when it is set).
  void Observe();
  // Writes the step's line to config_.step_trace (called by Learn when it is set).
  void Trace();
  void Retire();

  // Admission.
  int32_t PagesFor(const RequestState& r) const;
  int32_t PagesFor(int64_t prompt_len, int32_t max_tokens) const;
  // CheckRequest's length rule (OutOfRange naming "prompt" or "max_tokens").
  Status CheckRequestLength(int64_t prompt_len, int64_t max_tokens) const;
  // A running request still prefilling a prompt whose first page r's prompt starts with, or
  // null: r waits until those pages are published, then reuses them rather than computing them
  // again (n choices of one prompt, a system prompt that many requests send at once).
  RequestState* SharedPrefillToWaitFor(const RequestState& r) const;
  // Prefix caching on a hybrid target with room for recurrent states: prompts keep theirs at
  // some page ends (kv/recurrent_snapshots.h).
  bool KeepsPrefixStates() const;
  // A hybrid target's `writer` keeps its recurrent state where `reader`'s prompt parts from it.
  void KeepStateWhereShared(RequestState& writer, const RequestState& reader) const;
  // r.state_points, for a request whose prompt matched `matched_pages` cached pages.
  void PlanKeptStates(RequestState& r, int32_t matched_pages) const;
  // The forward of r's prompt chunk ending at `end` copies the states at the points it passes,
  // and after it they are kept for the prefix cache.
  void CaptureStatePoints(RequestState& r, int32_t end);
  void KeepCapturedStates(RequestState& r);
  // Publishes r's full pages of written positions for reuse (prefix caching).
  void PublishPages(const RequestState& r, int32_t written);

  // Stage helpers.
  // The draft rows r's block may hold past its anchor (config_.cut_blocks_at_output_end: up to
  // its tokens left less one; 0: nothing to draft for).
  int32_t DraftRowsFor(const RequestState& r) const;
  // Whether r's drafts are drawn from the drafter's distribution (config_.draft_sampling).
  bool DrawsDrafts(const RequestState& r) const;
  // The forward captures the drafter's feature layers only when some request will use them.
  void CaptureFeaturesFor(std::span<RequestState* const> requests, StepBatch& rows);
  // Sends rows [q_start, q_start + rows[i]) of span first_span + i of `pass`, for requests[i]
  // that have a draft context, to the drafter, adjacent ranges in one call (after any rows the
  // request held), or with `hold` keeps them in the request's held_context (at most
  // HeldContext::kMaxRows: past that they go at once); returns the rows sent (held ones not).
  int64_t FeedDrafter(const TargetPass& pass, std::span<RequestState* const> requests,
                      std::span<const int32_t> rows, int32_t first_span = 0, bool hold = false);
  // Whether this step's committed rows are held rather than fed: the planner drafts no request
  // but at its probes (auto decoding plainly), on a backend whose passes are all host passes
  // (the planner was told so: PlannerConfig::held_draft_contexts).
  bool HoldsCommittedRows() const;
  // The held rows of `requests` join their draft contexts, in one call to the drafter; returns
  // how many.
  int64_t ReleaseHeldRows(std::span<RequestState* const> requests);
  // Before Draft: the drafting requests' held rows join their contexts.
  void ReleaseHeldRowsOfDrafted();
  // Commits r's accepted drafts and next token (or fails r when its outcome did).
  void CommitOutcome(RequestState& r, const TargetPass& pass, const AcceptRequest& accepting,
                     const Acceptance& outcome);

  // Output rules (engine_output.cc).
  // Ends r with FinishReason::kError (its KV is freed when it retires); the others go on.
  void Fail(RequestState& r, const Status& why);
  // When r asks for logprobs: computes those of `tokens` from their logits rows [tokens, vocab]
  // into pending_logprobs_, which the AppendOutput of the same tokens takes.
  Status LogprobsOf(RequestState& r, std::span<const float> rows, std::span<const int32_t> tokens);
  // JSON mode on one request's rows: row j held to what may follow its output and drafts [0, j).
  void HoldToJson(RequestState& r, std::span<const int32_t> drafts, std::span<float> rows);
  // Appends tokens to r's output, applying stop ids, max_tokens and stop strings; streams them.
  void AppendOutput(RequestState& r, std::span<const int32_t> tokens);

  std::unique_ptr<StepBackend> owned_backend_;  // set by the TargetModel form of Create
  StepBackend& backend_;
  TargetModel& target_;  // backend_.target()
  Drafter* drafter_;     // backend_.drafter(), null when the policy drafts nothing
  EngineConfig config_;
  int32_t block_;  // W
  int64_t sparse_layers_;  // the target's mixture-of-experts layers (0: dense)
  PagedKvCache cache_;
  VerifyPlanner planner_;
  HeldContext held_scratch_;  // ReleaseHeldRows's rows of all its requests together
  std::vector<HeldContext*> held_;
  RequestId next_id_ = 1;
  std::deque<std::unique_ptr<RequestState>> queue_;
  std::vector<std::unique_ptr<RequestState>> running_;
  std::vector<RequestResult> finished_;
  StepStats stats_;
  // Step state and scratch, reused.
  StepBatch prefill_;  // this step's prompt chunks
  std::vector<RequestState*> prompt_requests_;  // the request of each span of prefill_
  std::vector<int32_t> prompt_rows_;            // [spans of prefill_] rows of each chunk
  StepBatch mixed_;  // a mixed step's verify pass: the packed rows, then prefill_'s
  // The experts the first rows of this step's spans woke (its prefill and verify passes; a
  // mixture of experts' budget::StepSample::occupancy).
  ExpertOccupancy occupancy_;
  DecodeStep step_;    // this step's decode stages
  ForwardOutput out_;  // the target's host pass (prefill, then verification)
  // JSON mode's masks over the vocabulary, made at the first request that asks for it.
  std::unique_ptr<JsonTokenMasks> json_masks_;
  std::vector<double> probs_;
  std::vector<TokenLogprobs> pending_logprobs_;  // LogprobsOf → AppendOutput
  std::vector<int32_t> commit_tokens_;           // CommitOutcome's tokens of one request
};

}  // namespace dscale
