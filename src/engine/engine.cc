#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu_backend.h"
#include "engine/kv_budget.h"
#include "kernels/cpu/softmax.h"
#include "spec/position_uniform.h"

namespace dscale {
namespace {

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Status ValidateParams(const GenerationParams& p, bool can_decode_text) {
  if (p.max_tokens < 1) return InvalidArgument("max_tokens: must be at least 1");
  const SamplingParams& s = p.sampling;
  if (!(s.temperature >= 0.0f) || !std::isfinite(s.temperature)) {
    return InvalidArgument("temperature: must be a finite number >= 0");
  }
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) return InvalidArgument("top_p: must be in (0, 1]");
  if (s.top_k < 0) return InvalidArgument("top_k: must be >= 0");
  if (p.logprobs.top < 0 || p.logprobs.top > kMaxTopLogprobs) {
    return InvalidArgument("top_logprobs: expected 0 to " + std::to_string(kMaxTopLogprobs) +
                           ", got " + std::to_string(p.logprobs.top));
  }
  if (!p.stop_strings.empty() && !can_decode_text) {
    return InvalidArgument("stop: stop strings need a tokenizer");
  }
  for (const std::string& stop : p.stop_strings) {
    if (stop.empty()) return InvalidArgument("stop: stop strings must not be empty");
  }
  return Status::Ok();
}

// The engine's host cache: the target's geometry, kv_tokens rounded up to whole pages, K/V stored
// as config.kv_dtype.
KvCacheShape CacheShape(const TargetModel& target, const EngineConfig& config) {
  const auto pages =
      static_cast<int32_t>((config.kv_tokens + config.page_size - 1) / config.page_size);
  return target.KvShape(config.page_size, pages).WithDtype(config.kv_dtype);
}

}  // namespace

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "?";
}

struct Engine::RequestState {
  RequestId id = 0;
  std::vector<int32_t> tokens;  // prompt, then output; the last output token is the anchor
  int32_t prompt_len = 0;
  int32_t prefilled = 0;  // prompt positions in the KV cache
  int32_t committed = 0;  // positions in the KV cache once decoding (tokens.size() − 1)
  GenerationParams params;
  int32_t seq = -1;
  bool draft_context = false;  // the drafter holds every committed position of this request
  bool cancelled = false;
  FinishReason finish = FinishReason::kNone;
  RequestResult result;
  std::vector<TokenLogprobs> logprobs;  // one per output token when params.logprobs asked

  bool prefill_done() const { return prefilled == prompt_len; }
  int32_t anchor() const { return tokens.back(); }
  // The output so far: held once, in `tokens`, and copied into the result at retirement.
  std::span<const int32_t> output() const { return std::span(tokens).subspan(prompt_len); }
};

Result<std::unique_ptr<Engine>> Engine::Create(TargetModel& target, Drafter* drafter,
                                               EngineConfig config) {
  auto backend = std::make_unique<CpuBackend>(target, drafter);
  StepBackend& stages = *backend;
  return Create(stages, std::move(backend), std::move(config));
}

Result<std::unique_ptr<Engine>> Engine::Create(StepBackend& backend, EngineConfig config) {
  return Create(backend, nullptr, std::move(config));
}

Result<std::unique_ptr<Engine>> Engine::Create(StepBackend& backend,
                                               std::unique_ptr<StepBackend> owned,
                                               EngineConfig config) {
  TargetModel& target = backend.target();
  Drafter* drafter = backend.drafter();
  if (config.policy.UsesDrafter() && drafter == nullptr) {
    return InvalidArgument("--spec " + config.policy.Name() + " needs a drafter (--drafter)");
  }
  if (config.max_running < 1) return InvalidArgument("max_running: must be at least 1");
  if (config.page_size < 1) return InvalidArgument("page_size: must be at least 1");
  if (config.prefill_chunk < 1 || config.prefill_budget < 1) {
    return InvalidArgument("prefill_chunk and prefill_budget: must be at least 1");
  }
  if (!config.policy.UsesDrafter()) drafter = nullptr;
  const int32_t block = drafter ? drafter->block_size() : 1;
  if (config.policy.mode == SpecMode::kFixed && config.policy.fixed_rows > block) {
    return InvalidArgument("--spec " + config.policy.Name() + ": the drafter's block has only " +
                           std::to_string(block) + " rows");
  }
  if (config.kv_tokens < 1) return InvalidArgument("kv_tokens: must be at least 1");
  // The whole cache may be written: it must fit in memory with the models loaded.
  const int64_t kv_positions =
      (config.kv_tokens + config.page_size - 1) / config.page_size * config.page_size;
  DSCALE_RETURN_IF_ERROR(
      CheckKvFitsInMemory(kv_positions, KvBytesPerPosition(target, drafter, config.kv_dtype)));
  const int64_t max_kv_tokens = MaxKvPositions(config.page_size);  // slots are int32
  if (config.kv_tokens > max_kv_tokens) {
    return InvalidArgument("kv_tokens: expected 1 to " + std::to_string(max_kv_tokens) +
                           " positions, got " + std::to_string(config.kv_tokens));
  }
  DSCALE_ASSIGN_OR_RETURN(VerifyPlanner planner,
                          VerifyPlanner::Create({.policy = config.policy,
                                                 .block = block,
                                                 .predictor = config.predictor,
                                                 .verify_budget = config.verify_budget,
                                                 .sps_table = config.sps_table,
                                                 .planted = config.planted_step_times,
                                                 .max_running = config.max_running}));
  // Every live count up to max_running needs a bucket.
  dvl::BucketConfig buckets;
  DSCALE_CHECK(buckets.buckets.back() == kMaxRunningRequests);
  if (config.max_running > buckets.buckets.back()) {
    return InvalidArgument("max_running " + std::to_string(config.max_running) +
                           " exceeds the largest request bucket (" +
                           std::to_string(buckets.buckets.back()) + ")");
  }
  return std::unique_ptr<Engine>(
      new Engine(backend, std::move(owned), std::move(config), block, std::move(planner)));
}

Engine::Engine(StepBackend& backend, std::unique_ptr<StepBackend> owned, EngineConfig config,
               int32_t block, VerifyPlanner planner)
    : owned_backend_(std::move(owned)),
      backend_(backend),
      target_(backend.target()),
      drafter_(config.policy.UsesDrafter() ? backend.drafter() : nullptr),
      config_(std::move(config)),
      block_(block),
      cache_(CacheShape(target_, config_)),
      planner_(std::move(planner)) {
  if (config_.prefix_cache) cache_.EnablePrefixCache();
  if (drafter_ != nullptr) drafter_->Bind(cache_);
  prefill_.EnsureCapacity(config_.prefill_budget, config_.max_running);
  blocks_.EnsureCapacity(config_.max_running * std::max(block_, 1), config_.max_running);
}

Engine::~Engine() = default;

int32_t Engine::PagesFor(const RequestState& r) const {
  return PagesFor(r.prompt_len, r.params.max_tokens);
}

int32_t Engine::PagesFor(int64_t prompt_len, int32_t max_tokens) const {
  return static_cast<int32_t>(
      KvPositionsForRequest(prompt_len, max_tokens, block_, config_.page_size) / config_.page_size);
}

int64_t Engine::MaxRequestTokens() const {
  const int64_t cache_positions = int64_t{cache_.shape().num_pages} * cache_.shape().page_size;
  return std::min(target_.config().max_position_embeddings,
                  MaxRequestTokensForKv(cache_positions, block_));
}

Status Engine::CheckRequest(std::span<const int32_t> prompt, const GenerationParams& params) const {
  if (prompt.empty()) return InvalidArgument("prompt: expected at least one token");
  DSCALE_RETURN_IF_ERROR(CheckTokenIds(prompt, target_.config().vocab_size, "prompt"));
  DSCALE_RETURN_IF_ERROR(ValidateParams(params, static_cast<bool>(config_.decode_text)));
  const auto prompt_len = static_cast<int64_t>(prompt.size());
  const int64_t total = prompt_len + params.max_tokens;
  // A prompt that leaves no room for one output token is the prompt's fault; otherwise
  // max_tokens asked for more than is left.
  const std::string field = prompt_len + 1 > MaxRequestTokens() ? "prompt: " : "max_tokens: ";
  const std::string asked = "the prompt (" + std::to_string(prompt_len) +
                            " tokens) + max_tokens (" + std::to_string(params.max_tokens) + ")";
  const int64_t context = target_.config().max_position_embeddings;
  if (total > context) {
    return OutOfRange(field + asked + " exceeds the context length " + std::to_string(context));
  }
  const int32_t pages = PagesFor(prompt_len, params.max_tokens);
  if (pages > cache_.shape().num_pages) {
    const int64_t page_size = cache_.shape().page_size;
    return OutOfRange(field + asked + " need " + std::to_string(int64_t{pages} * page_size) +
                      " KV positions (" + std::to_string(block_ - 1) +
                      " of them for the last step's block), more than the KV cache's " +
                      std::to_string(int64_t{cache_.shape().num_pages} * page_size) +
                      ": it holds prompt + max_tokens of at most " +
                      std::to_string(MaxRequestTokens()) +
                      " per request (the cache is sized by --kv-tokens, or by the memory "
                      "available)");
  }
  return Status::Ok();
}

Result<RequestId> Engine::Submit(std::vector<int32_t> prompt, GenerationParams params) {
  DSCALE_RETURN_IF_ERROR(CheckRequest(prompt, params));
  return SubmitChecked(std::move(prompt), std::move(params));
}

RequestId Engine::SubmitChecked(std::vector<int32_t> prompt, GenerationParams params) {
  auto r = std::make_unique<RequestState>();
  r->id = next_id_++;
  r->prompt_len = static_cast<int32_t>(prompt.size());
  r->tokens = std::move(prompt);
  r->params = std::move(params);
  r->result.id = r->id;
  r->result.prompt_tokens = r->prompt_len;
  r->result.submitted = Clock::now();
  const RequestId id = r->id;
  queue_.push_back(std::move(r));
  return id;
}

void Engine::Cancel(RequestId id) {
  for (auto& r : queue_) {
    if (r->id == id) r->cancelled = true;
  }
  for (auto& r : running_) {
    if (r->id == id) r->cancelled = true;
  }
}

void Engine::Admit() {
  while (!queue_.empty()) {
    RequestState& head = *queue_.front();
    if (head.cancelled) {
      head.finish = FinishReason::kCancelled;
      head.result.finish_reason = FinishReason::kCancelled;
      head.result.finished = Clock::now();
      finished_.push_back(std::move(head.result));
      queue_.pop_front();
      continue;
    }
    if (running() >= config_.max_running) return;
    if (config_.prefix_cache && WaitsForSharedPrefill(head)) return;
    // Cached pages may hold the prompt's start, up to its last token (whose logits give the
    // first output token, so it is always computed), with the drafter's rows where it drafts.
    const int32_t page_size = cache_.shape().page_size;
    const std::vector<int32_t> shared =
        cache_.MatchPrefix(std::span(head.tokens).first(head.prompt_len),
                           (head.prompt_len - 1) / page_size, drafter_ != nullptr);
    const auto shared_pages = static_cast<int32_t>(shared.size());
    if (PagesFor(head) - shared_pages > cache_.FreePagesSharing(shared)) return;
    head.seq = cache_.AddSequence(shared);
    head.prefilled = shared_pages * page_size;
    stats_.prefix_query_tokens += config_.prefix_cache ? head.prompt_len : 0;
    stats_.prefix_hit_tokens += head.prefilled;
    head.draft_context = drafter_ != nullptr && planner_.FeedNewRequest();
    const Status reserved = cache_.Reserve(head.seq, page_size * PagesFor(head));
    DSCALE_CHECK_MSG(reserved.ok(), "free pages were counted before reserving");
    running_.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
}

Result<bool> Engine::Step() {
  RetireFinished();
  Admit();
  if (running_.empty()) return false;
  DSCALE_RETURN_IF_ERROR(RunPrefill());
  DSCALE_RETURN_IF_ERROR(RunDecode());
  RetireFinished();
  return true;
}

Status Engine::RunToCompletion() {
  while (true) {
    DSCALE_ASSIGN_OR_RETURN(bool worked, Step());
    if (!worked && queue_.empty()) return Status::Ok();
  }
}

std::vector<RequestResult> Engine::TakeFinished() {
  std::vector<RequestResult> done = std::move(finished_);
  finished_.clear();
  return done;
}

int Engine::TileFor(int32_t max_query_rows) const {
  return config_.tile_routing && max_query_rows <= 16 ? 16 : 128;
}

Status Engine::RunPrefill() {
  const auto start = Clock::now();
  prefill_.Clear();
  std::vector<RequestState*> completing;  // prompts that finish in this step, in batch order
  std::vector<RequestState*> in_batch;    // every request of the batch, in batch order
  feed_rows_.clear();
  int32_t budget = config_.prefill_budget;
  for (auto& owned : running_) {
    RequestState& r = *owned;
    if (r.prefill_done() || r.cancelled || budget == 0) continue;
    const int32_t n = std::min({config_.prefill_chunk, r.prompt_len - r.prefilled, budget});
    AddRequestRows(prefill_, r.seq, r.prefilled, std::span(r.tokens).subspan(r.prefilled, n),
                   cache_, /*all_logits=*/false);
    budget -= n;
    r.prefilled += n;
    in_batch.push_back(&r);
    feed_rows_.push_back(n);
    if (r.prefill_done()) completing.push_back(&r);
  }
  if (prefill_.rows() == 0) return Status::Ok();
  prefill_.tile_rows = 128;  // prefill keeps the wide tile
  CaptureFeaturesFor(in_batch, prefill_);
  DSCALE_RETURN_IF_ERROR(target_.Forward(prefill_, cache_, &out_));
  stats_.prefill_rows += prefill_.rows();
  FeedDrafter(prefill_, in_batch, feed_rows_);
  for (const RequestState* r : completing) PublishPages(*r, r->prompt_len);

  // The first output token comes from the last prompt row's logits.
  const int64_t vocab = target_.config().vocab_size;
  for (size_t i = 0, logit_row = 0; i < prefill_.spans().size(); ++i, ++logit_row) {
    const StepSpan& span = prefill_.spans()[i];
    auto it = std::find_if(completing.begin(), completing.end(),
                           [&](RequestState* r) { return r->seq == span.seq; });
    if (it == completing.end()) continue;
    RequestState& r = **it;
    r.committed = r.prompt_len;
    const std::span<const float> row = std::span(out_.logits).subspan(logit_row * vocab, vocab);
    const Result<int32_t> token = SampleFirstToken(r, row);
    const Status logprobs = token.ok() ? LogprobsOf(r, row, std::span(&*token, 1)) : token.status();
    if (!logprobs.ok()) {
      Fail(r, logprobs);
      continue;
    }
    r.result.first_token = Clock::now();
    AppendOutput(r, std::span(&*token, 1));
  }
  stats_.prefill_s += SecondsSince(start);
  return Status::Ok();
}

Result<int32_t> Engine::SampleFirstToken(RequestState& r, std::span<const float> logits) {
  if (r.params.sampling.greedy()) {
    int32_t token = 0;
    cpu::ArgmaxRows(logits.data(), 1, static_cast<int64_t>(logits.size()), &token);
    DSCALE_RETURN_IF_ERROR(CheckGreedyChoice(logits, token));
    return token;
  }
  DSCALE_RETURN_IF_ERROR(MakeTargetDistribution(logits, r.params.sampling, &probs_));
  return SampleIndex(probs_, PositionUniform(r.params.sampling.seed, r.prompt_len));
}

void Engine::Fail(RequestState& r, const Status& why) {
  r.finish = FinishReason::kError;
  r.result.error = "position " + std::to_string(r.tokens.size()) + ": " + why.message();
  if (r.params.on_tokens) {
    r.params.on_tokens({.id = r.id, .new_tokens = {}, .finished = r.finish});
  }
}

Status Engine::RunDecode() {
  std::vector<RequestState*> batch;
  for (auto& r : running_) {
    // Decoding: the prompt is in the KV cache and the last output token is the anchor.
    if (r->prefill_done() && r->finish == FinishReason::kNone && !r->cancelled) {
      DSCALE_CHECK(r->committed == static_cast<int32_t>(r->tokens.size()) - 1);
      batch.push_back(r.get());
    }
  }
  if (batch.empty()) return Status::Ok();

  // The planner says how many of the requests with a draft context are drafted this step (the
  // first ones in batch order); the others verify their anchor only, and all stay fed.
  int32_t fed = 0;
  for (RequestState* r : batch) fed += r->draft_context ? 1 : 0;
  const int32_t to_draft =
      fed > 0 ? planner_.DraftCount(fed, static_cast<int32_t>(batch.size())) : 0;
  DSCALE_CHECK(to_draft >= 0 && to_draft <= fed);
  const bool draft = to_draft > 0;
  drafted_.assign(batch.size(), 0);
  for (size_t i = 0, picked = 0; i < batch.size(); ++i) {
    if (batch[i]->draft_context && picked < static_cast<size_t>(to_draft)) {
      drafted_[i] = 1;
      ++picked;
    }
  }
  budget::StepSample sample{.requests = static_cast<int32_t>(batch.size()), .drafted = to_draft};
  auto t = Clock::now();
  if (draft) DSCALE_RETURN_IF_ERROR(Draft(batch, &drafts_));
  const double draft_s = SecondsSince(t);
  stats_.draft_s += draft_s;

  t = Clock::now();
  StageBlocks(batch);
  DSCALE_ASSIGN_OR_RETURN(StepBatch * packed,
                          backend_.Decide(planner_, blocks_, drafts_, drafted_, draft_s));
  const double decision_s = SecondsSince(t);
  stats_.decision_s += decision_s;
  sample.draft_s = draft ? draft_s + decision_s : 0.0;
  const auto rest = Clock::now();

  // Verification runs the packed rows: request i owns rows offset_i .. offset_i + k_i − 1.
  t = Clock::now();
  const StepBatch& step = *packed;
  packed->tile_rows = TileFor(step.MaxQueryLen());
  CaptureFeaturesFor(batch, *packed);
  accept_requests_.clear();
  for (const RequestState* r : batch) {
    // Row 0 is the anchor at position `committed`; it predicts the next position.
    accept_requests_.push_back({.sampling = &r->params.sampling,
                                .first_position = int64_t{r->committed} + 1,
                                .logprobs = r->params.logprobs.enabled});
  }
  DSCALE_RETURN_IF_ERROR(backend_.Verify(step, accept_requests_, cache_, &out_));
  stats_.verify_s += SecondsSince(t);

  t = Clock::now();
  acceptances_.resize(batch.size());
  backend_.Accept(step, out_, accept_requests_, acceptances_);
  std::vector<VerifyResult> results(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    if (acceptances_[i].status.ok()) {
      results[i] = acceptances_[i].result;
    } else {
      Fail(*batch[i], acceptances_[i].status);  // commits nothing; retired after this step
    }
  }
  stats_.acceptance_s += SecondsSince(t);
  if (config_.on_step) Observe(batch, step, results);

  t = Clock::now();
  std::vector<int32_t> accepted_tokens;
  feed_rows_.clear();
  int64_t drafted_committed = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    RequestState& r = *batch[i];
    const StepSpan& span = step.spans()[i];
    const VerifyResult& v = results[i];
    stats_.verified_rows += span.q_len;
    if (r.finish == FinishReason::kError) {
      feed_rows_.push_back(0);
      continue;
    }
    stats_.committed_tokens += v.accepted + 1;
    ++stats_.accepted_histogram[std::min<size_t>(v.accepted, stats_.accepted_histogram.size() - 1)];
    r.result.accepted.push_back(v.accepted);
    ++r.result.steps;
    // The anchor and the accepted drafts now have valid KV rows; they join the draft context.
    r.committed += v.accepted + 1;
    feed_rows_.push_back(v.accepted + 1);
    sample.context += span.ctx_len;
    if (drafted_[i]) drafted_committed += v.accepted + 1;
    const std::span<const int32_t> accepted = step.tokens().subspan(span.q_start + 1, v.accepted);
    accepted_tokens.assign(accepted.begin(), accepted.end());
    accepted_tokens.push_back(v.next_token);
    // Row j of the span holds the target's logits for committed token j.
    const int64_t vocab = target_.config().vocab_size;
    const Status logprobs =
        LogprobsOf(r,
                   std::span(out_.logits)
                       .subspan(int64_t{span.q_start} * vocab, accepted_tokens.size() * vocab),
                   accepted_tokens);
    if (!logprobs.ok()) {
      Fail(r, logprobs);
      continue;
    }
    AppendOutput(r, accepted_tokens);
  }
  const auto feed_start = Clock::now();
  sample.fed_rows = FeedDrafter(step, batch, feed_rows_);
  sample.feed_s = SecondsSince(feed_start);
  ++stats_.decode_steps;
  stats_.decode_request_steps += static_cast<int64_t>(batch.size());
  stats_.last_step_requests = static_cast<int32_t>(batch.size());
  stats_.last_step_rows = step.rows();
  stats_.commit_s += SecondsSince(t);
  sample.rows = step.rows();
  sample.verify_s = SecondsSince(rest) - sample.feed_s;
  planner_.Record(sample, drafted_committed);
  if (planner_.DropDraftContexts()) {
    for (auto& r : running_) r->draft_context = false;
  }
  stats_.auto_budget = planner_.AutoSnapshot();
  return Status::Ok();
}

Status Engine::Draft(const std::vector<RequestState*>& batch, DraftOutput* drafts) {
  std::vector<DraftRequest> requests;
  requests.reserve(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!drafted_[i]) continue;
    const RequestState* r = batch[i];
    requests.push_back({.seq = r->seq,
                        .ctx_len = r->committed,
                        .anchor = r->anchor(),
                        .committed = std::span(r->tokens).first(r->committed)});
  }
  return backend_.Draft(requests, cache_, TileFor(block_), drafts);
}

void Engine::Observe(const std::vector<RequestState*>& batch, const StepBatch& step,
                     const std::vector<VerifyResult>& results) {
  std::vector<RequestId> ids;
  std::vector<int32_t> rows, accepted;
  for (size_t i = 0; i < batch.size(); ++i) {
    ids.push_back(batch[i]->id);
    rows.push_back(step.spans()[i].q_len);
    accepted.push_back(results[i].accepted);
  }
  const bool all_drafted = drafter_ != nullptr && std::all_of(drafted_.begin(), drafted_.end(),
                                                              [](uint8_t d) { return d; });
  config_.on_step({.step = stats_.decode_steps,
                   .ids = ids,
                   .drafts = all_drafted ? &drafts_ : nullptr,
                   .rows = rows,
                   .accepted = accepted});
}

void Engine::StageBlocks(const std::vector<RequestState*>& batch) {
  blocks_.Clear();
  for (size_t i = 0, d = 0; i < batch.size(); ++i) {
    const RequestState& r = *batch[i];
    blocks_.BeginSpan(r.seq, r.committed, cache_.PageTable(r.seq).data());
    blocks_.AddRow(r.anchor(), cache_.Slot(r.seq, r.committed), /*logits=*/true);
    if (!drafted_[i]) continue;
    const int32_t* candidates = drafts_.tokens.data() + d++ * drafts_.candidates;
    for (int32_t j = 1; j <= drafts_.candidates; ++j) {
      blocks_.AddRow(candidates[j - 1], cache_.Slot(r.seq, r.committed + j), /*logits=*/true);
    }
  }
}

Status Engine::LogprobsOf(RequestState& r, std::span<const float> rows,
                          std::span<const int32_t> tokens) {
  if (!r.params.logprobs.enabled) return Status::Ok();
  const int64_t vocab = target_.config().vocab_size;
  DSCALE_CHECK(static_cast<int64_t>(rows.size()) == static_cast<int64_t>(tokens.size()) * vocab);
  pending_logprobs_.resize(tokens.size());
  for (size_t j = 0; j < tokens.size(); ++j) {
    DSCALE_RETURN_IF_ERROR(ComputeTokenLogprobs(rows.subspan(j * vocab, vocab), r.params.sampling,
                                                tokens[j], r.params.logprobs.top, &probs_,
                                                &pending_logprobs_[j]));
  }
  return Status::Ok();
}

void Engine::AppendOutput(RequestState& r, std::span<const int32_t> tokens) {
  const size_t before = r.output().size();
  const bool with_logprobs = r.params.logprobs.enabled;
  if (with_logprobs) DSCALE_CHECK(pending_logprobs_.size() == tokens.size());
  for (size_t j = 0; j < tokens.size(); ++j) {
    const int32_t token = tokens[j];
    r.tokens.push_back(token);
    if (with_logprobs) r.logprobs.push_back(std::move(pending_logprobs_[j]));
    const auto& stops = r.params.stop_ids;
    if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
      r.finish = FinishReason::kStop;
      break;
    }
    if (static_cast<int32_t>(r.output().size()) >= r.params.max_tokens) {
      r.finish = FinishReason::kLength;
      break;
    }
  }
  if (!r.params.stop_strings.empty()) {
    // Shortest output whose text contains a stop string ends the request.
    const std::string text = config_.decode_text(r.output());
    for (const std::string& stop : r.params.stop_strings) {
      if (text.find(stop) == std::string::npos) continue;
      while (r.output().size() > before + 1) {
        const std::span<const int32_t> output = r.output();
        const std::string shorter = config_.decode_text(output.first(output.size() - 1));
        if (shorter.find(stop) == std::string::npos) break;
        r.tokens.pop_back();
        if (with_logprobs) r.logprobs.pop_back();
      }
      r.finish = FinishReason::kStop;
    }
  }
  stats_.output_tokens += static_cast<int64_t>(r.output().size() - before);
  if (r.params.on_tokens) {
    r.params.on_tokens(
        {.id = r.id,
         .new_tokens = r.output().subspan(before),
         .new_logprobs = with_logprobs ? std::span<const TokenLogprobs>(r.logprobs).subspan(before)
                                       : std::span<const TokenLogprobs>(),
         .finished = r.finish});
  }
}

void Engine::CaptureFeaturesFor(const std::vector<RequestState*>& in_batch_order, StepBatch& step) {
  const bool any = std::any_of(in_batch_order.begin(), in_batch_order.end(),
                               [](const RequestState* r) { return r->draft_context; });
  if (any) {
    step.capture_layers = drafter_->feature_layers();
  } else {
    step.capture_layers.clear();
  }
}

int64_t Engine::FeedDrafter(const StepBatch& step, const std::vector<RequestState*>& in_batch_order,
                            std::span<const int32_t> rows) {
  int64_t fed = 0;
  int32_t first = 0, count = 0;  // the pending run of adjacent rows
  for (size_t i = 0; i < in_batch_order.size(); ++i) {
    if (!in_batch_order[i]->draft_context) continue;
    const int32_t start = step.spans()[i].q_start;
    if (count > 0 && first + count != start) {
      AppendDraftContext(step, first, count);
      count = 0;
    }
    if (count == 0) first = start;
    count += rows[i];
    fed += rows[i];
  }
  if (count > 0) AppendDraftContext(step, first, count);
  return fed;
}

void Engine::AppendDraftContext(const StepBatch& step, int32_t first, int32_t count) {
  backend_.AppendContext(step, out_, first, count);
}

bool Engine::WaitsForSharedPrefill(const RequestState& r) const {
  const int32_t page_size = cache_.shape().page_size;
  if ((r.prompt_len - 1) / page_size == 0) return false;  // no page of r could be reused
  const auto first_page = std::span(r.tokens).first(page_size);
  for (const auto& owned : running_) {
    const RequestState& other = *owned;
    // Pages are published when a prompt's prefill completes, and reused with the drafter's rows
    // only when the drafter holds them (Admit's MatchPrefix).
    if (other.prefill_done() || other.cancelled || other.prompt_len < page_size) continue;
    if (drafter_ != nullptr && !other.draft_context) continue;
    if (std::ranges::equal(first_page, std::span(other.tokens).first(page_size))) return true;
  }
  return false;
}

void Engine::PublishPages(const RequestState& r, int32_t written) {
  // Positions below `written` hold their tokens' K/V rows; a stop string may have taken tokens
  // back from the output after their rows were written, so only tokens still held count.
  const auto n = std::min<size_t>(static_cast<size_t>(written), r.tokens.size());
  cache_.PublishPrefix(r.seq, std::span(r.tokens).first(n), r.draft_context);
}

void Engine::RetireFinished() {
  for (auto& owned : running_) {
    RequestState& r = *owned;
    if (r.cancelled && r.finish == FinishReason::kNone) r.finish = FinishReason::kCancelled;
    if (r.finish == FinishReason::kNone) continue;
    // A failed request's rows may not be finite: nothing of it is kept.
    if (r.finish != FinishReason::kError) {
      PublishPages(r, r.prefill_done() ? r.committed : r.prefilled);
    }
    cache_.RemoveSequence(r.seq);
    const std::span<const int32_t> output = r.output();
    r.result.output_ids.assign(output.begin(), output.end());
    r.result.logprobs = std::move(r.logprobs);
    r.result.finish_reason = r.finish;
    r.result.finished = Clock::now();
    if (r.result.first_token == Clock::time_point{}) r.result.first_token = r.result.finished;
    finished_.push_back(std::move(r.result));
  }
  std::erase_if(running_, [](const auto& r) { return r->finish != FinishReason::kNone; });
}

}  // namespace dscale
