// dscale serve: the OpenAI-compatible HTTP server (src/server) over one engine.
//
// Threads: the HTTP workers (parse, tokenize, relay output), one engine thread (owns the model,
// KV cache and scheduler), and one signal thread. SIGTERM or SIGINT drains: new requests get
// 503, in-flight requests finish, then the process exits 0; a second signal, or a drain longer
// than --drain-timeout, exits at once with status 1.

#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "budget_options.h"
#include "cli_util.h"
#include "commands.h"
#include "default_spec.h"
#include "engine/engine.h"
#include "engine/kv_budget.h"
#include "io/tokenizer/chat_format.h"
#include "model_options.h"
#include "runtime.h"
#include "server/engine_loop.h"
#include "server/http_server.h"
#include "server/output_text.h"

namespace dscale::cli {
namespace {

inline constexpr int32_t kMaxRunning = kMaxRunningRequests;  // what one engine runs at once
inline constexpr int32_t kMaxQueue = 16384;
inline constexpr int32_t kMaxHttpThreads = kMaxRunning + kMaxQueue + 16;

struct ServeArgs {
  ModelOptions models;
  std::string spec;  // empty until ApplyDefaultSpec or --spec sets it
  std::string served_model_name;
  std::string host = "127.0.0.1";
  int port = 8000;
  int32_t max_running = 16;
  int32_t max_queue = 256;
  int32_t http_threads = 0;
  int64_t kv_tokens = 0;  // 0: ServeKvTokens
  KvDtype kv_dtype = KvDtype::kBf16;
  int32_t default_max_tokens = 256;
  std::string sampling_defaults = "model";  // model: generation_config.json's; openai: none
  std::string hold_tool_calls = "strict";   // strict | all | none (server/tool_choice.h)
  int64_t max_body_bytes = 8 << 20;
  int32_t max_connections = 1024;
  int32_t header_timeout_s = 10;
  int32_t body_timeout_s = 30;
  int32_t keep_alive_timeout_s = 5;
  int32_t drain_timeout_s = 30;
  int32_t responses_store_mib = 64;  // server/response_store.h; 0: none
  bool reuse_port = false;
  bool tile_routing = true;
  bool prefix_cache = true;
  int32_t prefix_cache_states = EngineConfig{}.prefix_cache_states;
  bool mixed_prefill = true;
  int32_t prompt_wait_steps = EngineConfig{}.prompt_wait_steps;
  BudgetFlags budget;
  std::string step_trace;  // --step-trace FILE; empty: none
};

std::string ModelName(const ServeArgs& args) {
  if (!args.served_model_name.empty()) return args.served_model_name;
  std::filesystem::path dir(args.models.target);
  if (!dir.has_filename()) dir = dir.parent_path();  // "models/qwen3/" → "qwen3"
  return dir.filename().string();
}

server::ModelInfo MakeModelInfo(const ServeArgs& args, const Runtime& runtime, const Engine& engine,
                                server::SamplingDefaults sampling) {
  const DecoderConfig& config = runtime.target->config();
  server::ModelInfo info{.name = ModelName(args),
                         .context_length = config.max_position_embeddings,
                         .max_request_tokens = engine.MaxRequestTokens(),
                         .default_max_tokens = args.default_max_tokens,
                         .stop_ids = config.eos_token_ids,
                         .sampling_defaults = std::move(sampling)};
  info.hold_tool_calls = args.hold_tool_calls == "all"    ? server::HeldTools::kAll
                         : args.hold_tool_calls == "none" ? server::HeldTools::kNone
                                                          : server::HeldTools::kStrict;
  if (auto eos = runtime.tokenizer->eos_token_id()) info.stop_ids.push_back(*eos);
  for (int32_t id : EndOfTurnTokenIds(*runtime.tokenizer)) info.chat_stop_ids.push_back(id);
  return info;
}

// The sampling defaults requests get for the fields they leave out (--sampling-defaults), said
// on stderr when the model's apply.
Result<server::SamplingDefaults> SamplingDefaultsOf(const ServeArgs& args) {
  if (args.sampling_defaults == "openai") return server::SamplingDefaults{};
  DSCALE_ASSIGN_OR_RETURN(server::SamplingDefaults d,
                          server::LoadSamplingDefaults(args.models.target));
  if (!d.empty()) {
    std::fprintf(
        stderr,
        "dscale serve: requests that leave them out sample with %s/generation_config.json's "
        "%s (--sampling-defaults openai: OpenAI's defaults)\n",
        args.models.target.c_str(), d.Describe().c_str());
  }
  return d;
}

// --kv-tokens, or by default room for every running request at the full context length (with
// the positions each reserves past it for its last step's block, KvPositionsForRequest), capped
// at 90% of the memory available with the models loaded, less a hybrid target's recurrent
// states (rows take memory only once written, but every slot may be).
Result<int64_t> ServeKvTokens(const ServeArgs& args, Runtime& runtime) {
  if (args.kv_tokens > 0) return args.kv_tokens;
  StepBackend& backend = *runtime.main.backend;
  TargetModel& target = backend.target();
  const int64_t state_bytes = RecurrentStateBytes(target, args.max_running,
                                                  args.prefix_cache ? args.prefix_cache_states : 0);
  const int64_t bytes_per_position = KvBytesPerPosition(target, backend.drafter(), args.kv_dtype);
  DSCALE_ASSIGN_OR_RETURN(const int64_t fit, KvTokensThatFit(bytes_per_position, 0.9, state_bytes));
  const int32_t page_size = EngineConfig{}.page_size;
  // The states leave no room for a page: say so with the sizes (and what to lower).
  if (fit < page_size) {
    DSCALE_RETURN_IF_ERROR(CheckKvFitsInMemory(page_size, bytes_per_position, state_bytes));
  }
  // With the block the engine stages per request (1 when the policy runs no drafter).
  const int64_t full =
      KvTokensForDemand(args.max_running, target.config().max_position_embeddings - 1,
                        /*max_tokens=*/1, runtime.main.block_size(), page_size);
  return std::min(full, fit / page_size * page_size);
}

// The engine, after the start-up line with the size of its KV cache.
Result<std::unique_ptr<Engine>> MakeServeEngine(const ServeArgs& args, const LengthPolicy& policy,
                                                Runtime& runtime, StepTrace* trace) {
  DSCALE_ASSIGN_OR_RETURN(const int64_t kv_tokens, ServeKvTokens(args, runtime));
  std::printf("dscale serve: KV cache of %lld positions (%s)\n", static_cast<long long>(kv_tokens),
              std::string(KvDtypeName(args.kv_dtype)).c_str());
  return MakeEngine(runtime,
                    {.policy = policy,
                     .max_running = args.max_running,
                     .kv_tokens = kv_tokens,
                     .kv_dtype = args.kv_dtype,
                     .prefix_cache = args.prefix_cache,
                     .prefix_cache_states = args.prefix_cache_states,
                     .tile_routing = args.tile_routing,
                     .mixed_prefill = args.mixed_prefill,
                     .prompt_wait_steps = args.prompt_wait_steps,
                     .draft_sampling = args.models.draft_sampling,
                     .step_trace = trace},
                    {.budget = &args.budget, .token_text_of = &server::OutputTokenText});
}

// A server whose KV cache (or context length) cannot hold a one-token prompt with
// --default-max-tokens would refuse every request: an error at start-up instead.
Status CheckServesOneRequest(const Engine& engine, const ServeArgs& args) {
  GenerationParams smallest;
  smallest.max_tokens = args.default_max_tokens;
  const std::vector<int32_t> one_token = {0};
  if (Status s = engine.CheckRequest(one_token, smallest); !s.ok()) {
    return InvalidArgument(
        "the server could not run even a one-token prompt with "
        "--default-max-tokens " +
        std::to_string(args.default_max_tokens) + ": " + s.message() +
        " (raise --kv-tokens or lower --default-max-tokens)");
  }
  return Status::Ok();
}

server::ConnectionLimits ConnectionLimitsOf(const ServeArgs& args) {
  return {.max_body_bytes = static_cast<size_t>(args.max_body_bytes),
          .header_timeout = std::chrono::seconds(args.header_timeout_s),
          .body_timeout = std::chrono::seconds(args.body_timeout_s),
          .idle_timeout = std::chrono::seconds(args.keep_alive_timeout_s),
          .max_connections = args.max_connections};
}

// Every connection holds a file descriptor: raises the soft limit to what --max-connections
// needs (with room for the model files and the server's own), or says why it cannot.
Status EnsureDescriptors(int32_t max_connections) {
  constexpr rlim_t kReserve = 256;
  const rlim_t need = static_cast<rlim_t>(max_connections) + kReserve;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= need) return Status::Ok();
  if (limit.rlim_max >= need) {
    limit.rlim_cur = need;
    if (setrlimit(RLIMIT_NOFILE, &limit) == 0) return Status::Ok();
  }
  return InvalidArgument("--max-connections " + std::to_string(max_connections) + " needs " +
                         std::to_string(need) + " open files, but the limit is " +
                         std::to_string(limit.rlim_max) +
                         " (ulimit -n); lower --max-connections or raise the limit");
}

// Waits for SIGTERM / SIGINT (blocked in every thread), then drains and stops the server, until
// the main thread has finished serving (`ended`). A second signal, or a drain that outlasts
// `drain_timeout`, exits at once with status 1: a slow client can hold a worker thread, and
// with it the server's stop, for as long as it likes. `ended` set before any signal: the server
// stopped by itself and the signal only wakes us.
void WaitForSignal(const sigset_t& signals, server::HttpServer& http, server::EngineLoop& loop,
                   const std::atomic<bool>& ended, std::chrono::seconds drain_timeout) {
  int signal = 0;
  if (sigwait(&signals, &signal) != 0 || ended) return;
  std::fprintf(stderr, "dscale serve: signal %d: draining %d request(s) (at most %lld s)\n", signal,
               loop.in_flight(), static_cast<long long>(drain_timeout.count()));
  http.BeginDrain();
  const auto deadline = std::chrono::steady_clock::now() + drain_timeout;
  const timespec tick{.tv_sec = 0, .tv_nsec = 20'000'000};
  bool stopping = false;
  while (!ended) {
    if (!stopping && loop.in_flight() == 0 && http.open_responses() == 0) {
      http.Stop();  // returns at once; serving ends once the worker threads are done
      stopping = true;
    }
    if (sigtimedwait(&signals, nullptr, &tick) > 0) {
      std::fprintf(stderr, "dscale serve: second signal: exiting without draining\n");
      std::_Exit(1);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::fprintf(stderr,
                   "dscale serve: --drain-timeout of %lld s passed with %d request(s) and %d "
                   "response(s) unfinished: exiting\n",
                   static_cast<long long>(drain_timeout.count()), loop.in_flight(),
                   http.open_responses());
      std::_Exit(1);
    }
  }
}

// Serves HTTP on `engine` until a signal drains and stops the server (WaitForSignal).
int ServeUntilStopped(const ServeArgs& args, const LengthPolicy& policy, Runtime& rt,
                      Engine& engine, const sigset_t& signals) {
  Result<server::SamplingDefaults> sampling = SamplingDefaultsOf(args);
  if (!sampling.ok()) return ReportError("serve", sampling.status());
  const int32_t slots = args.max_running + args.max_queue;
  server::EngineLoop loop(engine, *rt.tokenizer, slots);
  const Engine& checker = engine;  // CheckRequest reads only what is fixed at creation
  server::HttpServer http(
      loop, *rt.tokenizer, MakeModelInfo(args, rt, engine, std::move(*sampling)),
      [&checker](std::span<const int32_t> prompt, const GenerationParams& params) {
        return checker.CheckRequest(prompt, params);
      },
      {.host = args.host,
       .port = args.port,
       .threads = args.http_threads > 0 ? args.http_threads : slots + 16,
       .limits = ConnectionLimitsOf(args),
       .reuse_port = args.reuse_port,
       .responses_store_bytes = static_cast<size_t>(args.responses_store_mib) << 20});
  if (Status s = http.Bind(); !s.ok()) return ReportError("serve", s);
  std::atomic<bool> ended{false};
  std::thread signal_thread([&] {
    WaitForSignal(signals, http, loop, ended, std::chrono::seconds(args.drain_timeout_s));
  });
  const WeightsMode mode = args.models.weights;
  const std::string weights =
      mode == WeightsMode::kAsStored ? "" : ", --weights " + std::string(WeightsModeName(mode));
  std::printf("dscale serve: listening on http://%s:%d (model \"%s\", --spec %s%s)\n",
              args.host.c_str(), http.port(), ModelName(args).c_str(), policy.Name().c_str(),
              weights.c_str());
  std::fflush(stdout);
  // The steps run on this thread, which loaded the models (EngineLoop::RunOnThisThread), and
  // HTTP is served from another; once serving ends the loop finishes what was accepted.
  std::thread http_thread([&] {
    http.Serve();
    loop.Stop();
  });
  loop.RunOnThisThread();
  http_thread.join();
  const bool woken_by_signal = http.draining();
  ended = true;
  if (!woken_by_signal) kill(getpid(), SIGTERM);  // Serve ended on its own: wake the signal thread
  signal_thread.join();
  std::fprintf(stderr, "dscale serve: stopped\n");
  return 0;
}

// Blocks SIGTERM and SIGINT, returning them for WaitForSignal. Called before any thread exists
// (model loading may start OpenMP's), so that every thread inherits the mask and only the signal
// thread receives them.
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not kill the server
  return signals;
}

// While the server starts (loading, dspark's profiling, the engine), SIGTERM or SIGINT ends the
// process at once with status 0: nothing has been accepted, so there is nothing to drain. Once
// Finish() is called, the signals stay pending for WaitForSignal.
class StartupSignalWatch {
 public:
  explicit StartupSignalWatch(const sigset_t& signals)
      : thread_([this, signals] {
          const timespec tick{.tv_sec = 0, .tv_nsec = 20'000'000};
          while (!done_) {
            if (const int signal = sigtimedwait(&signals, nullptr, &tick); signal > 0) {
              std::fprintf(stderr, "dscale serve: signal %d during start-up: exiting\n", signal);
              std::_Exit(0);
            }
          }
        }) {}
  ~StartupSignalWatch() { Finish(); }
  void Finish() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// One malloc arena per core (unless MALLOC_ARENA_MAX says otherwise) instead of glibc's eight:
// every HTTP thread that builds a response would otherwise get an arena of its own, each
// keeping what it freed (README, "Memory").
void CapMallocArenas() {
  if (std::getenv("MALLOC_ARENA_MAX") != nullptr) return;
  mallopt(M_ARENA_MAX, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

int RunServe(const ServeArgs& args) {
  const sigset_t signals = BlockStopSignals();
  CapMallocArenas();
  StartupSignalWatch startup(signals);
  if (Status s = EnsureDescriptors(args.max_connections); !s.ok()) return ReportError("serve", s);
  Result<LengthPolicy> policy = LengthPolicy::Parse(args.spec);
  if (!policy.ok()) return ReportError("serve", policy.status());
  Result<std::unique_ptr<Runtime>> runtime =
      LoadRuntime(args.models, PartsFor(*policy, TokenizerNeed::kRequired));
  if (!runtime.ok()) return ReportError("serve", runtime.status());
  Runtime& rt = **runtime;
  Result<std::unique_ptr<StepTrace>> trace = OpenStepTrace(args.step_trace);
  if (!trace.ok()) return ReportError("serve", trace.status());
  Result<std::unique_ptr<Engine>> engine = MakeServeEngine(args, *policy, rt, trace->get());
  if (!engine.ok()) return ReportError("serve", engine.status());
  if (Status s = CheckServesOneRequest(**engine, args); !s.ok()) return ReportError("serve", s);
  startup.Finish();
  return ServeUntilStopped(args, *policy, rt, **engine, signals);
}

}  // namespace

void RegisterServeCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server");
  AddModelOptions(cmd, &args->models, {});
  AddBudgetOptions(cmd, &args->budget);
  cmd->add_option("--spec", args->spec,
                  "Length policy: none, dflash, fixed:K, dscale, dspark (default: dscale with "
                  "--verify-budget auto when the drafter folder has a predictor or --predictor is "
                  "given, dflash without one, none without --drafter)");
  cmd->add_option("--served-model-name", args->served_model_name,
                  "Model name clients send (default: the target folder's name)");
  cmd->add_option("--host", args->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", args->port, "Port (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  // Every running or waiting request holds an HTTP worker thread: the bounds keep the threads
  // (and the engine's batch) at what one process can create.
  cmd->add_option("--max-running", args->max_running, "Running requests at most (c)")
      ->check(CLI::Range(1, kMaxRunning))
      ->capture_default_str();
  cmd->add_option("--max-queue", args->max_queue, "Waiting requests at most; beyond: 503")
      ->check(CLI::Range(0, kMaxQueue))
      ->capture_default_str();
  cmd->add_option("--http-threads", args->http_threads,
                  "HTTP worker threads (0: max-running + max-queue + 16)")
      ->check(CLI::Range(0, kMaxHttpThreads))
      ->capture_default_str();
  cmd->add_option("--kv-tokens", args->kv_tokens,
                  "KV cache capacity in positions (default: --max-running full contexts, within "
                  "90% of the available memory)")
      ->check(AtLeast(0));
  AddKvDtypeOption(cmd, &args->kv_dtype);
  cmd->add_flag("!--no-prefix-cache", args->prefix_cache,
                "Compute every prompt in full instead of reusing the KV pages of earlier requests "
                "that start the same way");
  cmd->add_option("--prefix-cache-states", args->prefix_cache_states,
                  "A hybrid target (linear_attention layers): prompt prefixes whose recurrent "
                  "state is kept for reuse, at most (each takes the state's size; 0: a hybrid's "
                  "prompts are computed in full)")
      ->check(AtLeast(0))
      ->capture_default_str();
  AddMixedPrefillFlag(cmd, &args->mixed_prefill);
  AddPromptWaitOption(cmd, &args->prompt_wait_steps);
  AddStepTraceOption(cmd, &args->step_trace);
  cmd->add_option("--default-max-tokens", args->default_max_tokens,
                  "max_tokens of requests that give none")
      ->check(AtLeast(1))
      ->capture_default_str();
  cmd->add_option("--sampling-defaults", args->sampling_defaults,
                  "What requests that leave out temperature, top_k, top_p, min_p or "
                  "repetition_penalty get: model (the target's generation_config.json "
                  "recommends them, as vLLM and SGLang read it) or openai (temperature 1, no "
                  "filter, no penalty)")
      ->check(CLI::IsMember({"model", "openai"}))
      ->capture_default_str();
  cmd->add_option("--hold-tool-calls", args->hold_tool_calls,
                  "Under tool_choice auto, whose calls the grammar holds to a tool's name and "
                  "parameters: strict (tools sent with strict: true, as OpenAI), all (every "
                  "tool's, as far as its parameters can be held) or none")
      ->check(CLI::IsMember({"strict", "all", "none"}))
      ->capture_default_str();
  cmd->add_option("--responses-store-mib", args->responses_store_mib,
                  "Memory for the Responses API's stored responses (previous_response_id, GET "
                  "/v1/responses/{id}), least recently used dropped first; 0 keeps none")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--drain-timeout", args->drain_timeout_s,
                  "Seconds SIGTERM / SIGINT waits for in-flight requests before exiting anyway "
                  "(status 1)")
      ->capture_default_str()
      ->check(CLI::Range(0, 86400));
  cmd->add_flag("--reuse-port", args->reuse_port,
                "Share --port with other servers that ask for it too (SO_REUSEPORT); otherwise "
                "a port in use is an error");
  cmd->add_option("--max-body-bytes", args->max_body_bytes,
                  "Largest request body as received (chunk framing included); beyond: 413")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--max-connections", args->max_connections,
                  "Open connections at most; beyond: 503 at once")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  cmd->add_option("--header-timeout", args->header_timeout_s,
                  "Seconds a request's headers may take to arrive; beyond: 408, closed")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--body-timeout", args->body_timeout_s,
                  "Seconds a request's body may take to arrive after its headers; beyond: 408")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--keep-alive-timeout", args->keep_alive_timeout_s,
                  "Seconds an idle connection is kept open between requests")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--tile-routing", args->tile_routing,
                  "on: 16-row attention tile for drafting and verification; off: 128 everywhere")
      ->capture_default_str();
  cmd->callback([args, exit_code, cmd] {
    ApplyDefaultSpec(*cmd, "serve", args->models.drafter, args->models.predictor,
                     args->models.drafter_head, &args->spec, &args->budget);
    *exit_code = RunServe(*args);
  });
}

}  // namespace dscale::cli
