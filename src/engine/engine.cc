#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "backend/cpu_backend.h"
#include "engine/kv_budget.h"

namespace dscale {
namespace {

// Runs `stage` and adds the seconds it took to `*seconds`; returns what the stage returns.
template <typename Stage>
auto Timed(double* seconds, Stage&& stage) {
  const auto start = Clock::now();
  struct AddElapsed {
    double* seconds;
    Clock::time_point start;
    ~AddElapsed() { *seconds += std::chrono::duration<double>(Clock::now() - start).count(); }
  } add{seconds, start};
  return stage();
}

Status ValidateParams(const GenerationParams& p, bool can_decode_text) {
  if (p.max_tokens < 1) return InvalidArgument("max_tokens: must be at least 1");
  const SamplingParams& s = p.sampling;
  if (!(s.temperature >= 0.0f) || !std::isfinite(s.temperature)) {
    return InvalidArgument("temperature: must be a finite number >= 0");
  }
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) return InvalidArgument("top_p: must be in (0, 1]");
  if (s.top_k < 0) return InvalidArgument("top_k: must be >= 0");
  if (!(s.min_p >= 0.0f && s.min_p <= 1.0f)) return InvalidArgument("min_p: must be in [0, 1]");
  if (p.logprobs.top < 0 || p.logprobs.top > kMaxTopLogprobs) {
    return InvalidArgument("top_logprobs: expected 0 to " + std::to_string(kMaxTopLogprobs) +
                           ", got " + std::to_string(p.logprobs.top));
  }
  if (!p.stop_strings.empty() && !can_decode_text) {
    return InvalidArgument("stop: stop strings need a tokenizer");
  }
  if (s.rules.json_schema != nullptr && !can_decode_text) {
    return InvalidArgument("response_format: JSON mode needs a tokenizer");
  }
  // Once the value closes only a stop id may follow (spec/json_token_mask.h).
  if (s.rules.json_schema != nullptr && (p.stop_ids.empty() || s.rules.min_tokens > 0)) {
    return InvalidArgument(
        "response_format: JSON mode (and a forced tool_choice, structured_outputs) ends the output "
        "where the value closes or the pattern can go no further, so it needs a stop id (not "
        "ignore_eos without stop_token_ids) and no min_tokens");
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

Status CheckDraftSampling(DraftSampling sampling, const LengthPolicy& policy,
                          StepBackend& backend) {
  const Drafter* drafter = policy.UsesDrafter() ? backend.drafter() : nullptr;
  if (sampling == DraftSampling::kArgmax || drafter == nullptr) return Status::Ok();
  if (!drafter->samples_drafts()) {
    return InvalidArgument("--draft-sampling distribution: the " + std::string(backend.name()) +
                           " backend's drafter proposes argmax drafts only; use "
                           "--draft-sampling argmax (or --device cpu)");
  }
  // dspark over a confidence head stays exact: the head's logit for draft k reads the draws
  // before k only, so the survival a_k that ranks (request, k) does not depend on draft k, nor
  // does any candidate ranked above it (a_{k+1} ≤ a_k, ties to the earlier position); the walk
  // takes (request, k) from those alone and stops at the first that does not pay (DSpark,
  // Appendix A). The predictor reads every row of the block, so it anticipates.
  const bool ranks_by_head = policy.RanksByConfidenceHead() && drafter->has_confidence_head();
  if (policy.UsesPredictor() && !ranks_by_head && drafter->conditions_on_candidates()) {
    return InvalidArgument(
        "--draft-sampling distribution: --spec " + policy.Name() +
        " sets each request's rows from its draft logits, which this drafter's head (Domino's, "
        "or DSpark's Markov head) computes from the drafts it sampled, so which drafts are "
        "verified would depend on the drafts themselves and sampling would no longer be exact; "
        "use --spec dflash or fixed:K with this drafter, or --draft-sampling argmax");
  }
  return Status::Ok();
}

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

Result<std::unique_ptr<Engine>> Engine::Create(TargetModel& target, Drafter* drafter,
                                               EngineConfig config,
                                               const budget::StepTimeSource* step_times) {
  auto backend = std::make_unique<CpuBackend>(target, drafter);
  StepBackend& stages = *backend;
  return Create(stages, std::move(backend), std::move(config), step_times);
}

Result<std::unique_ptr<Engine>> Engine::Create(StepBackend& backend, EngineConfig config,
                                               const budget::StepTimeSource* step_times) {
  return Create(backend, nullptr, std::move(config), step_times);
}

Result<std::unique_ptr<Engine>> Engine::Create(StepBackend& backend,
                                               std::unique_ptr<StepBackend> owned,
                                               EngineConfig config,
                                               const budget::StepTimeSource* step_times) {
  TargetModel& target = backend.target();
  Drafter* drafter = backend.drafter();
  if (config.max_running < 1) return InvalidArgument("max_running: must be at least 1");
  if (config.page_size < 1) return InvalidArgument("page_size: must be at least 1");
  if (config.prefill_chunk < 1 || config.prefill_budget < 1) {
    return InvalidArgument("prefill_chunk and prefill_budget: must be at least 1");
  }
  if (!config.policy.UsesDrafter()) drafter = nullptr;
  const int32_t block = drafter ? drafter->block_size() : 1;
  DSCALE_RETURN_IF_ERROR(CheckDraftSampling(config.draft_sampling, config.policy, backend));
  if (config.kv_tokens < 1) return InvalidArgument("kv_tokens: must be at least 1");
  if (config.prefix_cache_states < 0) {
    return InvalidArgument("prefix_cache_states: must be at least 0");
  }
  // The whole cache may be written, and every state held: they must fit in memory with the
  // models loaded.
  const int64_t kv_positions =
      (config.kv_tokens + config.page_size - 1) / config.page_size * config.page_size;
  DSCALE_RETURN_IF_ERROR(CheckKvFitsInMemory(
      kv_positions, KvBytesPerPosition(target, drafter, config.kv_dtype),
      RecurrentStateBytes(target, config.max_running,
                          config.prefix_cache ? config.prefix_cache_states : 0)));
  const int64_t max_kv_tokens = MaxKvPositions(config.page_size);  // slots are int32
  if (config.kv_tokens > max_kv_tokens) {
    return InvalidArgument("kv_tokens: expected 1 to " + std::to_string(max_kv_tokens) +
                           " positions, got " + std::to_string(config.kv_tokens));
  }
  DSCALE_ASSIGN_OR_RETURN(
      VerifyPlanner planner,
      VerifyPlanner::Create({.policy = config.policy,
                             .block = drafter ? block : 0,
                             .drafter_confidence = drafter && drafter->has_confidence_head(),
                             .inputs = config.inputs,
                             .step_times = step_times,
                             .max_running = config.max_running,
                             .experts = budget::ExpertShapeOf(target.config()),
                             .tile_routing = config.tile_routing,
                             .held_draft_contexts = backend.PassesOnHost()}));
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
      sparse_layers_(target_.config().SparseLayerCount()),
      cache_(CacheShape(target_, config_)),
      planner_(std::move(planner)) {
  if (config_.prefix_cache) cache_.EnablePrefixCache(config_.prefix_cache_states);
  if (drafter_ != nullptr) drafter_->Bind(cache_);
  prefill_.EnsureCapacity(config_.prefill_budget, config_.max_running);
  step_.blocks.EnsureCapacity(config_.max_running * std::max(block_, 1), config_.max_running);
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
  DSCALE_RETURN_IF_ERROR(ValidateParams(params, static_cast<bool>(config_.token_text)));
  DSCALE_RETURN_IF_ERROR(
      CheckLogitRules(params.sampling.rules, target_.config().vocab_size, params.max_tokens));
  return CheckRequestLength(static_cast<int64_t>(prompt.size()), params.max_tokens);
}

Status Engine::CheckRequestLength(int64_t prompt_len, int64_t max_tokens) const {
  const int64_t context = target_.config().max_position_embeddings;
  const int64_t limit = MaxRequestTokens();
  const std::string why =
      (limit < context ? "the KV cache holds " + std::to_string(limit) +
                             " tokens (prompt + max_tokens) per request, less than the context "
                             "length " +
                             std::to_string(context) +
                             " (it is sized by --kv-tokens, or by the "
                             "memory available),"
                       : "the context length is " + std::to_string(context) + " tokens") +
      " and the prompt has " + std::to_string(prompt_len);
  // A prompt that leaves no room for one output token is the prompt's fault; otherwise
  // max_tokens asked for more than is left.
  if (prompt_len >= limit)
    return OutOfRange("prompt: " + why + ", which leaves no room to generate");
  if (max_tokens > limit - prompt_len) {
    return OutOfRange("max_tokens: must be at most " + std::to_string(limit - prompt_len) + ": " +
                      why);
  }
  // MaxRequestTokens is KvPositionsForRequest's inverse: what passes here fits the cache.
  DSCALE_CHECK(PagesFor(prompt_len, static_cast<int32_t>(max_tokens)) <= cache_.shape().num_pages);
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
  // Requests start in arrival order, except that one waiting for what only time brings (KV
  // pages, its group's share, a shared prompt being prefilled) does not hold up those behind it;
  // one waiting for pages is passed over at most max_running times, then nothing behind it
  // starts first (README, "Scheduling").
  FinishCancelledInQueue();                   // whatever the room to start others
  std::vector<RequestState*> short_of_pages;  // passed over in this pass if a later one starts
  for (auto it = queue_.begin(); it != queue_.end() && running() < config_.max_running;) {
    RequestState& r = **it;
    if (GroupAtShare(r)) {
      ++it;
      continue;
    }
    if (RequestState* writer = config_.prefix_cache ? SharedPrefillToWaitFor(r) : nullptr) {
      KeepStateWhereShared(*writer, r);
      ++it;
      continue;
    }
    if (!TryStart(r)) {
      if (r.passed_over >= config_.max_running) return;
      short_of_pages.push_back(&r);
      ++it;
      continue;
    }
    running_.push_back(std::move(*it));
    it = queue_.erase(it);
    for (RequestState* waiting : short_of_pages) {
      if (++waiting->passed_over >= config_.max_running) return;
    }
  }
}

void Engine::FinishCancelledInQueue() {
  for (auto it = queue_.begin(); it != queue_.end();) {
    RequestState& r = **it;
    if (!r.cancelled) {
      ++it;
      continue;
    }
    r.finish = FinishReason::kCancelled;
    r.result.finish_reason = FinishReason::kCancelled;
    r.result.finished = Clock::now();
    finished_.push_back(std::move(r.result));
    it = queue_.erase(it);
  }
}

bool Engine::GroupAtShare(const RequestState& r) const {
  if (r.params.group == 0) return false;
  const int32_t share = (config_.max_running + 1) / 2;
  int32_t running_in_group = 0;
  for (const auto& other : running_) running_in_group += other->params.group == r.params.group;
  return running_in_group >= share;
}

bool Engine::TryStart(RequestState& r) {
  // Cached pages may hold the prompt's start, up to its last token (whose logits give the
  // first output token, so it is always computed), with the drafter's rows where it drafts.
  const int32_t page_size = cache_.shape().page_size;
  std::vector<int32_t> shared = cache_.MatchPrefix(
      std::span(r.tokens).first(r.prompt_len), (r.prompt_len - 1) / page_size, drafter_ != nullptr);
  const auto matched_pages = static_cast<int32_t>(shared.size());
  shared.resize(static_cast<size_t>(cache_.ResumablePages(shared)));
  const auto shared_pages = static_cast<int32_t>(shared.size());
  if (PagesFor(r) - shared_pages > cache_.FreePagesSharing(shared)) return false;
  r.seq = cache_.AddSequence(shared);
  r.prefilled = shared_pages * page_size;
  PlanKeptStates(r, matched_pages);
  r.result.cached_prompt_tokens = r.prefilled;
  stats_.prefix_query_tokens += config_.prefix_cache ? r.prompt_len : 0;
  stats_.prefix_hit_tokens += r.prefilled;
  r.draft_context = drafter_ != nullptr && planner_.FeedNewRequest();
  const Status reserved = cache_.Reserve(r.seq, page_size * PagesFor(r));
  DSCALE_CHECK_MSG(reserved.ok(), "free pages were counted before reserving");
  return true;
}

Result<bool> Engine::Step() {
  Retire();
  Admit();
  if (running_.empty()) return false;
  // Prompts that run alone run first, so that one finishing here decodes in this same step; a
  // mixed step's requests were decoding already, and its prompts decode from the next step.
  const bool waits = PromptWaitsForCompany();
  const bool mixed = !waits && MixesPrompts();
  if (!mixed && !waits) {
    DSCALE_RETURN_IF_ERROR(Timed(&stats_.prefill_s, [this] { return Prefill(); }));
  }
  // A mixed step's chunks are planned first: the planner prices its draft rows with the
  // experts they wake.
  if (mixed) PlanPromptChunks();
  if (SelectDecoding(mixed ? std::span<const int32_t>(prompt_rows_) : std::span<const int32_t>())) {
    if (mixed) {
      GatherPromptChunks();
      step_.prompt_rows = prefill_.rows();
      stats_.mixed_prefill_rows += step_.prompt_rows;
    }
    StageSeconds& t = step_.seconds;
    Timed(&t.feed, [this] { ReleaseHeldRowsOfDrafted(); });
    DSCALE_RETURN_IF_ERROR(Timed(&t.draft, [this] { return Draft(); }));
    DSCALE_RETURN_IF_ERROR(Timed(&t.decide, [this] { return Decide(); }));
    DSCALE_RETURN_IF_ERROR(Timed(&t.verify, [this] { return Verify(); }));
    Timed(&t.accept, [this] { Accept(); });
    if (mixed) Timed(&stats_.prefill_s, [this] { FinishMixedPrompts(); });
    Timed(&t.commit, [this] { Commit(); });
    Timed(&t.feed, [this] { FeedCommitted(); });
    Learn();
  }
  Retire();
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

bool Engine::KeepsPrefixStates() const {
  return config_.prefix_cache && config_.prefix_cache_states > 0 &&
         target_.config().HasLinearAttentionLayers();
}

// A hybrid target's request keeps its recurrent state where a later prompt may resume: where
// its match with the cached pages ended (a shared prefix, e.g. a system turn, ends about there:
// the next request that shares it resumes at that page), and at its prompt's last whole page (a
// repeat, or the next turn of a conversation).
void Engine::PlanKeptStates(RequestState& r, int32_t matched_pages) const {
  r.state_points.clear();
  if (!KeepsPrefixStates()) return;
  const int32_t page_size = cache_.shape().page_size;
  for (const int32_t at : {matched_pages * page_size, (r.prompt_len - 1) / page_size * page_size}) {
    if (at > r.prefilled && (r.state_points.empty() || at > r.state_points.back())) {
      r.state_points.push_back(at);
    }
  }
}

RequestState* Engine::SharedPrefillToWaitFor(const RequestState& r) const {
  const int32_t page_size = cache_.shape().page_size;
  if ((r.prompt_len - 1) / page_size == 0) return nullptr;  // no page of r could be reused
  const auto first_page = std::span(r.tokens).first(page_size);
  for (const auto& owned : running_) {
    const RequestState& other = *owned;
    // Pages are published when a prompt's prefill completes, and reused with the drafter's rows
    // only when the drafter holds them (Admit's MatchPrefix).
    if (other.prefill_done() || other.cancelled || other.prompt_len < page_size) continue;
    if (drafter_ != nullptr && !other.draft_context) continue;
    if (std::ranges::equal(first_page, std::span(other.tokens).first(page_size))) {
      return owned.get();
    }
  }
  return nullptr;
}

// The writer of a shared prompt start keeps its recurrent state where the prompt of a request
// waiting for its pages parts from its own (a system turn's end, say), so that the waiting
// request, and every later one with that start, resumes there.
void Engine::KeepStateWhereShared(RequestState& writer, const RequestState& reader) const {
  if (!KeepsPrefixStates()) return;
  const auto written = std::span(writer.tokens).first(writer.prompt_len);
  const auto common = static_cast<int32_t>(
      std::ranges::mismatch(written, std::span(reader.tokens).first(reader.prompt_len)).in1 -
      written.begin());
  const int32_t page_size = cache_.shape().page_size;
  const int32_t at = std::min(common, reader.prompt_len - 1) / page_size * page_size;
  std::vector<int32_t>& points = writer.state_points;
  if (at <= writer.prefilled || std::ranges::binary_search(points, at)) return;
  points.insert(std::ranges::upper_bound(points, at), at);
}

void Engine::PublishPages(const RequestState& r, int32_t written) {
  // Positions below `written` hold their tokens' K/V rows; a stop string may have taken tokens
  // back from the output after their rows were written, so only tokens still held count.
  const auto n = std::min<size_t>(static_cast<size_t>(written), r.tokens.size());
  cache_.PublishPrefix(r.seq, std::span(r.tokens).first(n), r.draft_context);
}

void Engine::Retire() {
  for (auto& owned : running_) {
    RequestState& r = *owned;
    if (r.cancelled && r.finish == FinishReason::kNone) r.finish = FinishReason::kCancelled;
    if (r.finish == FinishReason::kNone) continue;
    // A failed request's rows may not be finite: nothing of it is kept. The pages it publishes
    // hold the drafter's rows where it has a draft context: its held rows join it first.
    if (r.finish != FinishReason::kError) {
      if (r.draft_context) {
        RequestState* const retiring[] = {&r};
        ReleaseHeldRows(retiring);
      }
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
