#include "server/engine_loop.h"

#include <malloc.h>

#include <algorithm>
#include <optional>
#include <span>

#include "core/log.h"

namespace dscale::server {

bool SlotGate::TryAcquire(int32_t count) {
  int32_t used = used_.load();
  while (used + count <= slots_) {
    if (used_.compare_exchange_weak(used, used + count)) return true;
  }
  return false;
}

void SlotGate::Release() {
  const int32_t before = used_.fetch_sub(1);
  DSCALE_CHECK_MSG(before > 0, "a slot was released twice");
}

struct EngineLoop::Active {
  uint64_t ticket = 0;
  std::shared_ptr<RequestChannel> channel;
  OutputText text;
  Clock::time_point arrived;
  Clock::time_point first_token;
  // The log-probabilities of tokens whose text OutputText has not sent or dropped yet, oldest
  // first (empty unless asked for).
  std::deque<TokenLogprobs> held_logprobs;
  bool failed = false;  // the channel already has an error
  std::optional<int32_t> reasoning_close_token;  // PreparedRequest's
};

namespace {

// The output's tokens up to and including `close` (all of them when it never came), with
// thinking on; 0 otherwise.
int64_t CountReasoningTokens(std::span<const int32_t> output, std::optional<int32_t> close) {
  if (!close) return 0;
  const auto end = std::find(output.begin(), output.end(), *close);
  return (end - output.begin()) + (end == output.end() ? 0 : 1);
}

}  // namespace

EngineLoop::EngineLoop(Engine& engine, const Tokenizer& tokenizer, int32_t request_slots)
    : engine_(engine), tokenizer_(tokenizer), slots_(request_slots) {
  metrics_.request_slots = request_slots;
  Publish();
}

EngineLoop::~EngineLoop() { Stop(); }

void EngineLoop::Start() {
  DSCALE_CHECK(!thread_.joinable());
  thread_ = std::thread([this] { Run(); });
}

void EngineLoop::RunOnThisThread() {
  DSCALE_CHECK(!thread_.joinable());
  Run();
}

void EngineLoop::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

Result<uint64_t> EngineLoop::Submit(PreparedRequest request,
                                    std::shared_ptr<RequestChannel> channel) {
  std::vector<PreparedRequest> requests;
  requests.push_back(std::move(request));
  DSCALE_ASSIGN_OR_RETURN(std::vector<uint64_t> tickets,
                          SubmitAll(std::move(requests), {std::move(channel)}));
  return tickets.front();
}

Result<std::vector<uint64_t>> EngineLoop::SubmitAll(
    std::vector<PreparedRequest> requests, std::vector<std::shared_ptr<RequestChannel>> channels) {
  DSCALE_CHECK(requests.size() == channels.size() && !requests.empty());
  const auto count = static_cast<int32_t>(requests.size());
  if (!slots_.TryAcquire(count)) {
    return ResourceExhausted(count == 1 ? "all " + std::to_string(slots_.slots()) +
                                              " request slots are in use"
                                        : std::to_string(count) + " request slots are not free (" +
                                              std::to_string(slots_.slots() - slots_.used()) +
                                              " of " + std::to_string(slots_.slots()) + " are)");
  }
  std::vector<uint64_t> tickets;
  {
    std::lock_guard lock(mu_);
    const Clock::time_point now = Clock::now();
    for (int32_t i = 0; i < count; ++i) {
      tickets.push_back(next_ticket_++);
      incoming_.push_back({.ticket = tickets.back(),
                           .request = std::move(requests[i]),
                           .channel = std::move(channels[i]),
                           .arrived = now});
    }
  }
  cv_.notify_one();
  return tickets;
}

void EngineLoop::Cancel(uint64_t ticket) {
  {
    std::lock_guard lock(mu_);
    cancels_.push_back(ticket);
  }
  cv_.notify_one();
}

void EngineLoop::Run() {
  std::vector<Task> tasks;
  std::vector<uint64_t> cancels;
  bool was_busy = false;
  while (true) {
    const bool busy = engine_.running() > 0 || engine_.queued() > 0;
    if (!busy && was_busy) ReturnFreedMemory();  // outside the lock: HTTP threads go on
    was_busy = busy;
    {
      std::unique_lock lock(mu_);
      if (!busy) {
        cv_.wait(lock, [&] { return stop_ || !incoming_.empty() || !cancels_.empty(); });
        if (stop_ && incoming_.empty()) break;
      }
      tasks.swap(incoming_);
      cancels.swap(cancels_);
    }
    for (Task& task : tasks) StartTask(std::move(task));
    for (const uint64_t ticket : cancels) CancelTicket(ticket);
    tasks.clear();
    cancels.clear();
    StepOnce();
    Publish();
  }
}

void EngineLoop::ReturnFreedMemory() {
  // Every HTTP thread that built a response allocated from a malloc arena of its own, and glibc
  // keeps what is freed there for reuse: after a burst of large responses (n = 16 choices with
  // 20 top log-probabilities a token) that was ~65 MiB of idle RSS on the bundled pair. Trimming
  // every arena when the engine goes idle gives it back (docs: README, "Memory").
  malloc_trim(0);
}

void EngineLoop::StartTask(Task task) {
  auto active = std::make_unique<Active>(
      Active{.ticket = task.ticket,
             .channel = task.channel,
             .text = OutputText(tokenizer_, task.request.params.stop_strings),
             .arrived = task.arrived,
             .reasoning_close_token = task.request.reasoning_close_token});
  GenerationParams params = std::move(task.request.params);
  params.on_tokens = [this](const TokenEvent& event) { OnTokens(event); };
  // The HTTP thread checked the request (Engine::CheckRequest) where it entered.
  const RequestId id = engine_.SubmitChecked(std::move(task.request.prompt), std::move(params));
  by_ticket_[task.ticket] = id;
  active_[id] = std::move(active);
}

void EngineLoop::CancelTicket(uint64_t ticket) {
  const auto it = by_ticket_.find(ticket);
  if (it != by_ticket_.end()) engine_.Cancel(it->second);
}

void EngineLoop::StepOnce() {
  const Result<bool> worked = engine_.Step();
  if (!worked.ok()) FailAll(worked.status());
  for (const RequestResult& result : engine_.TakeFinished()) OnFinished(result);
}

void EngineLoop::OnTokens(const TokenEvent& event) {
  const auto it = active_.find(event.id);
  if (it == active_.end()) return;
  Active& a = *it->second;
  if (a.first_token == Clock::time_point{}) a.first_token = Clock::now();
  OutputText::Piece piece = a.text.Push(event.new_tokens);
  a.channel->Append(piece.text, ReportedLogprobs(a, event.new_logprobs, piece.reported));
}

std::vector<LogprobEntry> EngineLoop::ReportedLogprobs(Active& a,
                                                       std::span<const TokenLogprobs> fresh,
                                                       const std::vector<bool>& reported) {
  a.held_logprobs.insert(a.held_logprobs.end(), fresh.begin(), fresh.end());
  std::vector<TokenLogprobs> out;
  for (const bool report : reported) {
    if (a.held_logprobs.empty()) break;  // log-probabilities were not asked for
    if (report) out.push_back(std::move(a.held_logprobs.front()));
    a.held_logprobs.pop_front();
  }
  return LogprobEntries(out, tokenizer_);
}

void EngineLoop::OnFinished(const RequestResult& result) {
  const auto it = active_.find(result.id);
  if (it == active_.end()) return;
  Active& a = *it->second;
  const Usage usage{
      .prompt_tokens = result.prompt_tokens,
      .completion_tokens = static_cast<int64_t>(result.output_ids.size()),
      .cached_prompt_tokens = result.cached_prompt_tokens,
      .reasoning_tokens = CountReasoningTokens(result.output_ids, a.reasoning_close_token)};
  Outcome outcome = Outcome::kCancelled;
  if (a.failed) {
    outcome = Outcome::kError;
  } else if (result.finish_reason == FinishReason::kError) {
    // This request alone could not go on; the engine freed its KV and serves the others.
    DSCALE_LOG(kError) << "request " << a.ticket << " failed: " << result.error;
    a.channel->Fail(InternalError("the request could not be completed: " + result.error));
    outcome = Outcome::kError;
  } else if (result.finish_reason != FinishReason::kCancelled) {
    OutputText::Piece piece = a.text.Finish();
    a.channel->Append(piece.text, ReportedLogprobs(a, {}, piece.reported));
    const bool stopped = result.finish_reason == FinishReason::kStop || a.text.stopped();
    outcome = stopped ? Outcome::kStop : Outcome::kLength;
  }
  {
    std::lock_guard lock(metrics_mu_);
    ++metrics_.finished[static_cast<int>(outcome)];
    metrics_.prompt_tokens += usage.prompt_tokens;
    metrics_.generation_tokens += usage.completion_tokens;
    if (outcome == Outcome::kStop || outcome == Outcome::kLength) {
      const Clock::time_point first =
          a.first_token == Clock::time_point{} ? result.finished : a.first_token;
      metrics_.time_to_first_token.Observe(SecondsBetween(a.arrived, first));
      metrics_.request_duration.Observe(SecondsBetween(a.arrived, result.finished));
    }
  }
  DSCALE_LOG(kDebug) << "request " << a.ticket << " ended (" << OutcomeName(outcome) << "), "
                     << usage.completion_tokens << " tokens";
  // Counted and its slot free before the client hears of the end, so that a client that sends
  // its next request (or reads /metrics) right away finds both.
  const std::shared_ptr<RequestChannel> channel = std::move(a.channel);
  std::string stop_string = a.text.stopped() ? a.text.stop_string() : std::string();
  by_ticket_.erase(a.ticket);
  active_.erase(it);
  slots_.Release();
  channel->Finish(outcome, usage, std::move(stop_string));
}

void EngineLoop::FailAll(const Status& status) {
  DSCALE_LOG(kError) << "engine step failed: " << status.ToString();
  for (auto& [id, active] : active_) {
    if (active->failed) continue;
    active->failed = true;
    active->channel->Fail(InternalError("the engine failed: " + status.message()));
    engine_.Cancel(id);
  }
}

void EngineLoop::Publish() {
  int32_t incoming = 0;
  {
    std::lock_guard lock(mu_);
    incoming = static_cast<int32_t>(incoming_.size());
  }
  std::lock_guard lock(metrics_mu_);
  metrics_.stats = engine_.stats();
  metrics_.block_size = engine_.block_size();
  metrics_.waiting = incoming + engine_.queued();
  metrics_.running = engine_.running();
  metrics_.free_kv_pages = engine_.free_kv_pages();
  metrics_.total_kv_pages = engine_.total_kv_pages();
  metrics_.prefix_cache_states = engine_.prefix_cache_states();
}

EngineMetrics EngineLoop::Metrics() const {
  std::lock_guard lock(metrics_mu_);
  return metrics_;
}

}  // namespace dscale::server
