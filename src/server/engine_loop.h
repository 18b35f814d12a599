#pragma once
// The one thread that owns the engine (model, KV cache, scheduler). HTTP threads never touch
// the engine: they post requests and cancellations here and read each request's output from
// its RequestChannel.
//
//   HTTP thread:  Submit(prepared, channel) ──► incoming ──┐
//                 Cancel(ticket)            ──► cancels  ──┤ (mutex + condvar)
//   engine thread: take both ─► Engine::SubmitChecked / Cancel ─► Engine::Step ─► token events
//                  ─► OutputText ─► channel.Append; finished ─► channel.Finish, slot freed
//
// Bounded: at most `request_slots` requests are in the server (waiting or running); Submit
// refuses more (the HTTP layer answers 503 with Retry-After).

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "io/tokenizer/tokenizer.h"
#include "server/metrics.h"
#include "server/output_text.h"
#include "server/prompt_builder.h"
#include "server/request_channel.h"

namespace dscale::server {

// A counting bound shared by threads: TryAcquire(n) takes n slots at once when that many are
// free, else none.
class SlotGate {
 public:
  explicit SlotGate(int32_t slots) : slots_(slots) {}
  bool TryAcquire(int32_t count = 1);
  void Release();
  int32_t used() const { return used_.load(); }
  int32_t slots() const { return slots_; }

 private:
  const int32_t slots_;
  std::atomic<int32_t> used_{0};
};

class EngineLoop {
 public:
  // `engine` and `tokenizer` must outlive the loop.
  EngineLoop(Engine& engine, const Tokenizer& tokenizer, int32_t request_slots);
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Runs the loop on a thread of its own.
  void Start();
  // Runs the loop on the calling thread instead, returning once Stop() has been called (from
  // another thread) and every submitted request has ended. For the thread that loaded the models:
  // OpenMP keeps a team of threads for each thread that starts parallel regions, so the steps
  // then run on the team that loading started, with no second team beside it (whose threads
  // spin on the cores the steps need under OMP_WAIT_POLICY=active: twice the step time on two
  // cores).
  void RunOnThisThread();
  // Lets every submitted request finish, then joins the loop's thread (after Start) or lets
  // RunOnThisThread return.
  void Stop();

  // HTTP threads. `request` must have passed the engine's CheckRequest (the HTTP thread's
  // validation). Returns the request's ticket, or ResourceExhausted when every slot is held. The
  // channel receives the output; the request's slot is freed when it ends.
  Result<uint64_t> Submit(PreparedRequest request, std::shared_ptr<RequestChannel> channel);
  // A client request's n choices as one admission: all of them get a slot and are queued, in
  // order, or none is and nothing changes (ResourceExhausted). `channels` pairs with `requests`.
  // More choices than request_slots() is the caller's to refuse (they can never fit).
  Result<std::vector<uint64_t>> SubmitAll(std::vector<PreparedRequest> requests,
                                          std::vector<std::shared_ptr<RequestChannel>> channels);
  // Requests the server holds at most (running and waiting).
  int32_t request_slots() const { return slots_.slots(); }
  // Cancels a request (its KV is freed at the next step); unknown or finished tickets are
  // ignored.
  void Cancel(uint64_t ticket);

  // Requests submitted and not yet ended.
  int32_t in_flight() const { return slots_.used(); }
  // The engine side of the metrics, as of the last step.
  EngineMetrics Metrics() const;

 private:
  struct Task {
    uint64_t ticket = 0;
    PreparedRequest request;
    std::shared_ptr<RequestChannel> channel;
    Clock::time_point arrived;
  };
  struct Active;

  void Run();
  void StartTask(Task task);
  void CancelTicket(uint64_t ticket);
  void StepOnce();
  void OnTokens(const TokenEvent& event);
  void OnFinished(const RequestResult& result);
  // The entries of the tokens `reported` settles (OutputText::Piece), `fresh` appended to those
  // the request holds.
  std::vector<LogprobEntry> ReportedLogprobs(Active& a, std::span<const TokenLogprobs> fresh,
                                             const std::vector<bool>& reported);
  void FailAll(const Status& status);
  void Publish();
  // Hands the memory freed in the allocator's arenas back to the system (the loop went idle).
  static void ReturnFreedMemory();

  Engine& engine_;
  const Tokenizer& tokenizer_;
  SlotGate slots_;
  std::thread thread_;

  // Shared with HTTP threads; guarded by mu_.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Task> incoming_;
  std::vector<uint64_t> cancels_;
  bool stop_ = false;
  uint64_t next_ticket_ = 1;

  // Engine thread only.
  std::unordered_map<RequestId, std::unique_ptr<Active>> active_;
  std::unordered_map<uint64_t, RequestId> by_ticket_;

  // Written by the engine thread, read by /metrics; guarded by metrics_mu_.
  mutable std::mutex metrics_mu_;
  EngineMetrics metrics_;
};

}  // namespace dscale::server
