// The stages of Engine::Step after admission, in the order Step runs them. Each decode stage
// reads and writes step_ (engine/decode_step.h); timing is Step's, around the stages.

#include <algorithm>
#include <utility>

#include "engine/engine.h"

namespace dscale {

void Engine::CaptureFeaturesFor(std::span<RequestState* const> requests, StepBatch& rows) {
  const bool any = std::any_of(requests.begin(), requests.end(),
                               [](const RequestState* r) { return r->draft_context; });
  if (any) {
    rows.capture_layers = drafter_->feature_layers();
  } else {
    rows.capture_layers.clear();
  }
}

bool Engine::MixesPrompts() const {
  if (!config_.mixed_prefill || !backend_.VerifyTakesPromptRows()) return false;
  const auto prefilling = [](const auto& r) { return !r->prefill_done() && !r->cancelled; };
  const auto decoding = [](const auto& r) { return r->decoding(); };
  return std::ranges::any_of(running_, prefilling) && std::ranges::any_of(running_, decoding);
}

// The pending prompts wait only while a decoding request is sure to finish (its max_tokens)
// before the shortest of their waits runs out: a request that finishes frees its slot for the
// next one queued (or, in a closed loop, the next one its client sends), which is admitted the
// step after and runs its prompt in the same pass as theirs. With none decoding, or a wait
// spent, the prompts run.
bool Engine::PromptWaitsForCompany() {
  if (sparse_layers_ == 0 || config_.prompt_wait_steps == 0) return false;
  int32_t steps_left = config_.prompt_wait_steps;
  bool pending = false;
  for (auto& r : running_) {
    if (r->prefill_done() || r->cancelled) continue;
    pending = true;
    steps_left = std::min(steps_left, config_.prompt_wait_steps - r->prompt_waits);
  }
  if (!pending || steps_left <= 0) return false;
  const auto finishes_soon = [steps_left](const auto& r) {
    return r->decoding() && r->tokens_left() <= steps_left;
  };
  if (!std::ranges::any_of(running_, finishes_soon)) return false;
  for (auto& r : running_) {
    if (!r->prefill_done() && !r->cancelled) ++r->prompt_waits;
  }
  ++stats_.prompt_wait_steps;
  return true;
}

void Engine::PlanPromptChunks() {
  prompt_requests_.clear();
  prompt_rows_.clear();
  int32_t budget = config_.prefill_budget;
  for (auto& owned : running_) {
    RequestState& r = *owned;
    if (r.prefill_done() || r.cancelled || budget == 0) continue;
    const int32_t n = std::min({config_.prefill_chunk, r.prompt_len - r.prefilled, budget});
    budget -= n;
    prompt_requests_.push_back(&r);
    prompt_rows_.push_back(n);
  }
}

void Engine::GatherPromptChunks() {
  PlanPromptChunks();
  prefill_.Clear();
  for (size_t i = 0; i < prompt_requests_.size(); ++i) {
    RequestState& r = *prompt_requests_[i];
    const int32_t n = prompt_rows_[i];
    AddRequestRows(prefill_, r.seq, r.prefilled, std::span(r.tokens).subspan(r.prefilled, n),
                   cache_, /*all_logits=*/false, SpanRows::kAlwaysKept);
    CaptureStatePoints(r, r.prefilled + n);
    r.prefilled += n;
  }
  prefill_.tile_rows = 128;  // prefill keeps the wide tile
  CaptureFeaturesFor(prompt_requests_, prefill_);
}

// The state points a chunk of r's prompt ending at `end` passes are captured by its forward
// (set for every chunk of a hybrid's prompt, so none is left from a pass that failed).
void Engine::CaptureStatePoints(RequestState& r, int32_t end) {
  if (!KeepsPrefixStates()) return;
  const auto last = std::ranges::upper_bound(r.state_points, end);
  cache_.recurrent().CaptureAfter(r.seq, std::span(r.state_points.begin(), last));
}

// After the chunk's forward: the captured states go to the pages that stand for their prefixes.
void Engine::KeepCapturedStates(RequestState& r) {
  if (r.state_points.empty() || r.state_points.front() > r.prefilled) return;
  RecurrentStates& states = cache_.recurrent();
  const std::span<const int32_t> captured = states.capture_positions(r.seq);
  for (size_t i = 0; i < captured.size(); ++i) {
    cache_.KeepRecurrentState(r.seq, std::span(r.tokens).first(captured[i]),
                              states.CapturedState(r.seq, i));
  }
  r.state_points.erase(r.state_points.begin(), r.state_points.begin() + captured.size());
  states.ClearCaptures(r.seq);
}

// Prefill: the step's prompt chunks in a pass of their own (no request decodes this step, or
// mixed prefill is off).
Status Engine::Prefill() {
  GatherPromptChunks();
  if (prefill_.rows() == 0) return Status::Ok();
  DSCALE_ASSIGN_OR_RETURN(const TargetPass pass, backend_.Prefill(prefill_, cache_, &out_));
  occupancy_.Add(out_.expert_occupancy);
  FinishPromptChunks(pass, /*first_span=*/0, /*first_logits_row=*/0);
  return Status::Ok();
}

void Engine::FinishPromptChunks(const TargetPass& pass, int32_t first_span,
                                int64_t first_logits_row) {
  stats_.prefill_rows += prefill_.rows();
  // Every prompt row is kept (a hybrid target's recurrent state moves past the chunk).
  for (RequestState* r : prompt_requests_) {
    target_.CommitSequenceState(cache_, r->seq, r->prefilled);
    KeepCapturedStates(*r);
  }
  FeedDrafter(pass, prompt_requests_, prompt_rows_, first_span);

  // Chunk i's one logits row (its last row's) is row first_logits_row + i of the pass.
  std::vector<RequestState*> finished;
  std::vector<AcceptRequest> accepting;
  for (size_t i = 0; i < prompt_requests_.size(); ++i) {
    RequestState& r = *prompt_requests_[i];
    if (!r.prefill_done()) continue;
    PublishPages(r, r.prompt_len);
    r.committed = r.prompt_len;
    finished.push_back(&r);
    accepting.push_back({.sampling = &r.params.sampling,
                         .first_position = r.prompt_len,
                         .logprobs = r.params.logprobs.enabled,
                         .logits_row = first_logits_row + static_cast<int64_t>(i)});
  }
  std::vector<Acceptance> outcomes(accepting.size());
  AcceptRows(pass, finished, accepting, outcomes);
  for (size_t i = 0; i < finished.size(); ++i) {
    if (outcomes[i].status.ok()) finished[i]->result.first_token = Clock::now();
    CommitOutcome(*finished[i], pass, accepting[i], outcomes[i]);
  }
}

bool Engine::SelectDecoding(std::span<const int32_t> prompt_chunks) {
  step_.Reset();
  for (auto& r : running_) {
    if (!r->decoding()) continue;
    DSCALE_CHECK(r->committed == static_cast<int32_t>(r->tokens.size()) - 1);
    step_.requests.push_back(r.get());
  }
  if (step_.requests.empty()) return false;
  // The planner says how many of the requests that can use a draft — a draft context and more
  // than one token left to commit — are drafted this step (the first ones in batch order); the
  // others verify their anchor only, and all stay fed.
  const auto draftable = [this](const RequestState* r) {
    return r->draft_context && DraftRowsFor(*r) > 0;
  };
  const auto fed = static_cast<int32_t>(std::ranges::count_if(step_.requests, draftable));
  step_.fed_count = fed;
  const int32_t to_draft = fed > 0 ? planner_.DraftCount(fed, step_.size(), prompt_chunks) : 0;
  DSCALE_CHECK(to_draft >= 0 && to_draft <= fed);
  step_.drafted.assign(step_.requests.size(), 0);
  for (size_t i = 0; i < step_.requests.size() && step_.drafted_count < to_draft; ++i) {
    if (!draftable(step_.requests[i])) continue;
    step_.drafted[i] = 1;
    ++step_.drafted_count;
  }
  return true;
}

int32_t Engine::DraftRowsFor(const RequestState& r) const {
  return config_.cut_blocks_at_output_end ? r.tokens_left() - 1 : block_ - 1;
}

bool Engine::DrawsDrafts(const RequestState& r) const {
  return config_.draft_sampling == DraftSampling::kDistribution && !r.params.sampling.greedy();
}

Status Engine::Draft() {
  if (step_.drafted_count == 0) return Status::Ok();
  std::vector<DraftRequest> requests;
  requests.reserve(static_cast<size_t>(step_.drafted_count));
  const int32_t read = planner_.CandidatesRead(block_ - 1);
  for (size_t i = 0; i < step_.requests.size(); ++i) {
    if (!step_.drafted[i]) continue;
    const RequestState& r = *step_.requests[i];
    requests.push_back({.seq = r.seq,
                        .ctx_len = r.committed,
                        .anchor = r.anchor(),
                        .committed = std::span(r.tokens).first(r.committed),
                        .sampling = DrawsDrafts(r) ? &r.params.sampling : nullptr,
                        .candidates = read});
  }
  return backend_.Draft(requests, cache_, TileRowsFor(block_, config_.tile_routing), &step_.drafts);
}

// Decide: each request's block — [anchor, candidates…] when drafted, the anchor alone
// otherwise — and the planner's k_i rows of it, packed (with the blocks' capture layers). A
// block holds no more rows than the request's tokens_left: k verified rows commit at most k
// tokens, so rows past the end of its output would be verified for nothing.
Status Engine::Decide() {
  StepBatch& blocks = step_.blocks;
  blocks.Clear();
  const DraftOutput& drafts = step_.drafts;
  for (size_t i = 0, d = 0; i < step_.requests.size(); ++i) {
    const RequestState& r = *step_.requests[i];
    blocks.BeginSpan(r.seq, r.committed, cache_.PageTable(r.seq).data());
    blocks.AddRow(r.anchor(), cache_.Slot(r.seq, r.committed), /*logits=*/true);
    if (!step_.drafted[i]) continue;
    const int32_t* candidates = drafts.tokens.data() + d++ * drafts.candidates;
    const int32_t kept = std::min(drafts.candidates, DraftRowsFor(r));
    for (int32_t j = 1; j <= kept; ++j) {
      blocks.AddRow(candidates[j - 1], cache_.Slot(r.seq, r.committed + j), /*logits=*/true);
    }
  }
  CaptureFeaturesFor(step_.requests, blocks);
  DSCALE_ASSIGN_OR_RETURN(step_.packed,
                          planner_.Plan(blocks, drafts, step_.drafted, step_.seconds.draft));
  return Status::Ok();
}

// Verify: request i owns rows q_start .. q_start + k_i − 1 of the packed batch, every one with
// logits: row 0 is the anchor at position `committed`, predicting the next position. A request
// whose drafts were drawn from the drafter's distribution hands its block's draft rows to Accept.
Status Engine::Verify() {
  const StepBatch& packed = *step_.packed;
  const DraftOutput& drafts = step_.drafts;
  for (size_t i = 0, d = 0; i < step_.requests.size(); ++i) {
    const RequestState& r = *step_.requests[i];
    const StepSpan& span = packed.spans()[i];
    DraftRows rows;
    if (step_.drafted[i] && DrawsDrafts(r)) {
      const int64_t block_values =
          static_cast<int64_t>(drafts.logits.size()) / step_.drafted_count;
      rows = {.logits = std::span(drafts.logits).subspan(d * block_values, block_values),
              .columns = block_values / drafts.candidates,
              .column_ids = drafts.column_ids};
    }
    d += step_.drafted[i];
    step_.accepting.push_back(
        {.sampling = &r.params.sampling,
         .first_position = int64_t{r.committed} + 1,
         .logprobs = r.params.logprobs.enabled,
         .logits_row = span.q_start,
         .drafts = packed.tokens().subspan(span.q_start + 1, span.q_len - 1),
         .draft_rows = rows});
  }
  DSCALE_ASSIGN_OR_RETURN(step_.pass, backend_.Verify(PassRows(), step_.accepting, cache_, &out_));
  if (sparse_layers_ > 0) {
    step_.experts_per_layer = double(out_.experts_run) / double(sparse_layers_);
    occupancy_.Add(out_.expert_occupancy);
    if (step_.prompt_rows == 0) {
      stats_.verify_experts_per_layer += step_.experts_per_layer;
      ++stats_.expert_counted_steps;
    }
  }
  return Status::Ok();
}

// The verify pass's rows: the packed batch, or in a mixed step the packed rows and then the
// prompt chunks (their logits rows after the packed rows', so request i's rows are where Accept
// reads them either way). Tiles do not change a row's bits (kernels/cpu/attention.h): the pass
// takes the prompts' wide tile.
const StepBatch& Engine::PassRows() {
  const StepBatch& packed = *step_.packed;
  if (step_.prompt_rows == 0) return packed;
  mixed_.Clear();
  mixed_.Append(packed);
  mixed_.Append(prefill_);
  mixed_.tile_rows = std::max(packed.tile_rows, prefill_.tile_rows);
  mixed_.causal = true;
  mixed_.capture_layers =
      packed.capture_layers.empty() ? prefill_.capture_layers : packed.capture_layers;
  return mixed_;
}

void Engine::FinishMixedPrompts() {
  const StepBatch& packed = *step_.packed;
  FinishPromptChunks(step_.pass, packed.num_spans(),
                     static_cast<int64_t>(packed.logit_rows().size()));
}

void Engine::Accept() {
  step_.outcomes.resize(step_.requests.size());
  AcceptRows(step_.pass, step_.requests, step_.accepting, step_.outcomes);
}

void Engine::AcceptRows(const TargetPass& pass, std::span<RequestState* const> requests,
                        std::span<const AcceptRequest> accepting, std::span<Acceptance> outcomes) {
  const int64_t vocab = target_.config().vocab_size;
  for (size_t i = 0; i < requests.size(); ++i) {
    RequestState& r = *requests[i];
    const LogitRules& rules = r.params.sampling.rules;
    if (rules.empty()) continue;
    // A request with rules never gets a device pass (backend/cuda_backend.cc, OnDevice).
    DSCALE_CHECK(!pass.on_device() && pass.out == &out_);
    const AcceptRequest& a = accepting[i];
    const auto rows = static_cast<int64_t>(a.drafts.size()) + 1;
    const std::span<float> logits =
        std::span(out_.logits).subspan(a.logits_row * vocab, rows * vocab);
    ApplyLogitRules(rules, std::span(r.tokens).first(r.prompt_len), r.output(), a.drafts, logits,
                    vocab);
    if (rules.json_schema != nullptr) HoldToJson(r, a.drafts, logits);
    HoldBackStopIds(rules, static_cast<int64_t>(r.output().size()), r.params.stop_ids, logits,
                    vocab);
    CloseReasoningAtBudget(rules, r.output(), a.drafts, logits, vocab);
  }
  backend_.Accept(pass, accepting, outcomes);
}

void Engine::HoldToJson(RequestState& r, std::span<const int32_t> drafts, std::span<float> rows) {
  const int64_t vocab = target_.config().vocab_size;
  if (json_masks_ == nullptr) {
    json_masks_ = std::make_unique<JsonTokenMasks>(vocab, config_.token_text);
  }
  const LogitRules& rules = r.params.sampling.rules;
  if (r.json_tokens == 0)
    r.json_state = JsonGrammar::Start(*rules.json_schema, rules.reasoning_end);
  const std::span<const int32_t> output = r.output();
  r.json_state = json_masks_->StateAfter(r.json_state, output.subspan(r.json_tokens));
  r.json_tokens = static_cast<int32_t>(output.size());
  JsonGrammar state = r.json_state;
  const auto num_rows = static_cast<int64_t>(rows.size()) / vocab;
  for (int64_t j = 0; j < num_rows; ++j) {
    json_masks_->Mask(state, r.params.stop_ids, rows.subspan(j * vocab, vocab));
    if (j + 1 < num_rows) state = json_masks_->Advance(state, drafts[j]);
  }
}

void Engine::CommitOutcome(RequestState& r, const TargetPass& pass, const AcceptRequest& accepting,
                           const Acceptance& outcome) {
  if (!outcome.status.ok()) {
    Fail(r, outcome.status);  // commits nothing; retired after this step
    return;
  }
  const VerifyResult& v = outcome.result;
  std::vector<int32_t>& tokens = commit_tokens_;
  tokens.assign(accepting.drafts.begin(), accepting.drafts.begin() + v.accepted);
  tokens.push_back(v.next_token);
  if (r.params.logprobs.enabled) {
    DSCALE_CHECK_MSG(!pass.on_device(), "a request asking for logprobs gets a host pass");
    // Row j of the request's logits holds the target's distribution for committed token j.
    const int64_t vocab = target_.config().vocab_size;
    const Status logprobs = LogprobsOf(
        r, std::span(pass.out->logits).subspan(accepting.logits_row * vocab, tokens.size() * vocab),
        tokens);
    if (!logprobs.ok()) {
      Fail(r, logprobs);
      return;
    }
  }
  AppendOutput(r, tokens);
}

// Commit: the anchor and the accepted drafts now have valid KV rows (committed positions); a
// hybrid target's recurrent state moves to the committed length, the rejected drafts' rows
// leaving nothing behind (TargetModel::CommitSequenceState); the accepted drafts and the next
// token join the output.
void Engine::Commit() {
  for (size_t i = 0; i < step_.requests.size(); ++i) {
    RequestState& r = *step_.requests[i];
    const Acceptance& outcome = step_.outcomes[i];
    const int32_t rows = outcome.status.ok() ? outcome.result.accepted + 1 : 0;
    step_.committed_rows.push_back(rows);
    if (rows > 0) {
      r.committed += rows;
      target_.CommitSequenceState(cache_, r.seq, r.committed);
      r.result.accepted.push_back(outcome.result.accepted);
      ++r.result.steps;
    }
    CommitOutcome(r, step_.pass, step_.accepting[i], outcome);
  }
}

void Engine::FeedCommitted() {
  step_.fed_rows += FeedDrafter(step_.pass, step_.requests, step_.committed_rows,
                                /*first_span=*/0, HoldsCommittedRows());
}

bool Engine::HoldsCommittedRows() const {
  return backend_.PassesOnHost() && planner_.HoldsDraftContexts();
}

int64_t Engine::FeedDrafter(const TargetPass& pass, std::span<RequestState* const> requests,
                            std::span<const int32_t> rows, int32_t first_span, bool hold) {
  const int64_t width =
      static_cast<int64_t>(pass.rows->capture_layers.size()) * target_.config().hidden_size;
  int64_t fed = 0;
  int32_t first = 0, count = 0;  // the pending run of adjacent rows
  const auto send_run = [&] {
    if (count > 0) backend_.AppendContext(pass, first, count);
    count = 0;
  };
  for (size_t i = 0; i < requests.size(); ++i) {
    RequestState& r = *requests[i];
    if (!r.draft_context) continue;
    const int32_t start = pass.rows->spans()[static_cast<size_t>(first_span) + i].q_start;
    if (hold && r.held_context.rows() + rows[i] <= HeldContext::kMaxRows) {
      r.held_context.Hold(pass, width, start, rows[i]);
      continue;
    }
    // The rows it held come first (the drafter's rows of a position never depend on the order
    // they arrive in; this keeps the positions ascending all the same).
    if (!r.held_context.empty()) {
      send_run();
      fed += ReleaseHeldRows(std::span(&requests[i], 1));
    }
    fed += rows[i];
    if (count > 0 && first + count != start) send_run();
    if (count == 0) first = start;
    count += rows[i];
  }
  send_run();
  return fed;
}

int64_t Engine::ReleaseHeldRows(std::span<RequestState* const> requests) {
  held_.clear();
  for (RequestState* r : requests) {
    if (!r->held_context.empty()) held_.push_back(&r->held_context);
  }
  if (held_.empty()) return 0;
  DSCALE_CHECK_MSG(drafter_ != nullptr, "held draft-context rows need a drafter");
  return HeldContext::Release(held_, *drafter_, held_scratch_);
}

void Engine::ReleaseHeldRowsOfDrafted() {
  for (size_t i = 0; i < step_.requests.size(); ++i) {
    if (step_.drafted[i]) step_.drafting.push_back(step_.requests[i]);
  }
  step_.fed_rows += ReleaseHeldRows(step_.drafting);
}

void Engine::Learn() {
  if (config_.on_step) Observe();
  const StepBatch& packed = *step_.packed;
  const StageSeconds& t = step_.seconds;
  budget::StepSample sample{.requests = step_.size(), .drafted = step_.drafted_count};
  int64_t drafted_committed = 0;
  for (size_t i = 0; i < step_.requests.size(); ++i) {
    const StepSpan& span = packed.spans()[i];
    const Acceptance& outcome = step_.outcomes[i];
    stats_.verified_rows += span.q_len;
    if (!outcome.status.ok()) continue;
    stats_.committed_tokens += outcome.result.accepted + 1;
    ++stats_.accepted_histogram[std::min<size_t>(outcome.result.accepted,
                                                 stats_.accepted_histogram.size() - 1)];
    sample.context += span.ctx_len;
    if (step_.drafted[i]) drafted_committed += outcome.result.accepted + 1;
  }
  ++stats_.decode_steps;
  stats_.decode_request_steps += step_.size();
  stats_.last_step_requests = step_.size();
  stats_.last_step_rows = packed.rows();
  stats_.draft_s += t.draft;
  stats_.decision_s += t.decide;
  stats_.verify_s += t.verify;
  stats_.acceptance_s += t.accept;
  stats_.commit_s += t.commit + t.feed;

  sample.draft_s = step_.drafted_count > 0 ? t.draft + t.decide : 0.0;
  sample.fed_rows = step_.fed_rows;
  sample.feed_s = t.feed;
  sample.rows = packed.rows();
  sample.verify_s = t.verify + t.accept + t.commit;
  sample.prompt_rows = step_.prompt_rows;
  sample.experts = step_.experts_per_layer;
  sample.occupancy = std::exchange(occupancy_, {});
  planner_.Record(sample, drafted_committed);
  if (planner_.DropDraftContexts()) {
    for (auto& r : running_) {
      r->draft_context = false;
      r->held_context.Clear();
    }
  }
  stats_.auto_budget = planner_.AutoSnapshot();
  if (config_.step_trace != nullptr) Trace();
}

void Engine::Trace() {
  int64_t committed = 0;
  for (const int32_t rows : step_.committed_rows) committed += rows;
  std::optional<double> experts;
  if (sparse_layers_ > 0) experts = step_.experts_per_layer;  // prompt rows' too in a mixed step
  config_.step_trace->Write({.step = stats_.decode_steps - 1,
                             .requests = step_.size(),
                             .fed = step_.fed_count,
                             .drafted = step_.drafted_count,
                             .rows = step_.packed->rows(),
                             .committed = committed,
                             .prompt_rows = step_.prompt_rows,
                             .seconds = step_.seconds,
                             .experts_per_layer = experts,
                             .auto_budget = stats_.auto_budget});
}

void Engine::Observe() {
  std::vector<RequestId> ids;
  std::vector<int32_t> rows, accepted;
  for (size_t i = 0; i < step_.requests.size(); ++i) {
    ids.push_back(step_.requests[i]->id);
    rows.push_back(step_.packed->spans()[i].q_len);
    accepted.push_back(step_.outcomes[i].result.accepted);  // 0 for a failed request
  }
  const bool all_drafted = drafter_ != nullptr && step_.drafted_count == step_.size();
  config_.on_step({.step = stats_.decode_steps,  // before Learn counts this step
                   .ids = ids,
                   .drafts = all_drafted ? &step_.drafts : nullptr,
                   .rows = rows,
                   .accepted = accepted});
}

}  // namespace dscale
