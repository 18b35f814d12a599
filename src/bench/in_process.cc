#include "bench/in_process.h"

#include <algorithm>
#include <string>

#include "io/tokenizer/chat_template.h"
#include "spec/length_policy.h"

namespace dscale::bench {
namespace {

// KV positions beyond prompt + max_tokens each request may hold (the draft block and page
// rounding), generously.
constexpr int64_t kKvSlackPerRequest = 128;

}  // namespace

Result<std::vector<std::vector<int32_t>>> EncodeChatPrompts(const Tokenizer& tokenizer,
                                                            std::span<const std::string> texts,
                                                            const std::string& system) {
  std::vector<std::vector<int32_t>> out;
  for (const std::string& text : texts) {
    std::vector<ChatMessage> messages;
    if (!system.empty()) messages.push_back({.role = "system", .content = system});
    messages.push_back({.role = "user", .content = text});
    DSCALE_ASSIGN_OR_RETURN(
        std::string formatted,
        ApplyChatTemplate(ChatFormatOf(tokenizer), messages, {.enable_thinking = false}));
    DSCALE_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer.Encode(formatted));
    out.push_back(std::move(ids));
  }
  return out;
}

Result<std::string> SharedSystemPrompt(const Tokenizer& tokenizer, int32_t tokens) {
  std::string text = "You are a careful assistant. Follow these house rules in every answer.\n";
  for (int rule = 1;; ++rule) {
    DSCALE_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer.Encode(text));
    if (static_cast<int32_t>(ids.size()) >= tokens) return text;
    text += "Rule " + std::to_string(rule) +
            ": check each step of the reasoning once more, state the units of every quantity, "
            "and keep the final answer on its own line.\n";
  }
}

CellRequests ManifestRequests(const Manifest& manifest,
                              std::span<const std::vector<int32_t>> prompts, uint64_t seed) {
  CellRequests out;
  uint64_t index = 0;
  auto add = [&](std::vector<LoopRequest>& list, int32_t prompt) {
    const std::vector<int32_t>& ids = prompts[static_cast<size_t>(prompt)];
    out.longest_prompt = std::max(out.longest_prompt, static_cast<int32_t>(ids.size()));
    list.push_back({.prompt = ids, .seed = seed + index++});
  };
  for (int32_t p : manifest.warmup) add(out.warmup, p);
  for (int32_t p : manifest.measured) add(out.measured, p);
  return out;
}

namespace {

// What `mode` runs on: its backend, and the policy's planner inputs (the mode's own
// --verify-budget over the shared one).
struct ModeSetup {
  LengthPolicy policy;
  StepBackend* backend = nullptr;
  PolicyInputs inputs;
};

// The flag that supplies a drafter's models, for errors.
std::string DrafterFlags(ModeDrafter drafter) {
  switch (drafter) {
    case ModeDrafter::kDomino:
      return " (the drafter's Domino head; its predictor: --domino-predictor)";
    case ModeDrafter::kDSpark:
      return " (DSpark's drafter: --dspark-drafter; its predictor: --dspark-predictor)";
    case ModeDrafter::kMain:
      return "";
  }
  return "";
}

Result<ModeSetup> SetUp(const InProcessModels& models, const BenchMode& mode) {
  ModeSetup setup;
  DSCALE_ASSIGN_OR_RETURN(setup.policy, LengthPolicy::Parse(mode.policy));
  const ModeModels& drafting = models.For(mode.drafter);
  setup.backend = drafting.backend;
  if (setup.backend == nullptr) {
    return InvalidArgument("mode " + mode.label +
                           (mode.drafter == ModeDrafter::kDomino
                                ? " runs the drafter's Domino head: it needs --drafter"
                            : mode.drafter == ModeDrafter::kDSpark
                                ? " runs DSpark's drafter: it needs --dspark-drafter"
                                : " has no models to run"));
  }
  setup.inputs = {.predictor = drafting.predictor,
                  .verify_budget = models.verify_budget,
                  .sps_table = models.sps_table,
                  .confidence_calibration = drafting.confidence_calibration};
  if (!mode.verify_budget.empty()) {
    Result<budget::VerifyBudget> parsed = budget::VerifyBudget::Parse(mode.verify_budget);
    if (!parsed.ok()) return parsed.status().WithContext("--verify-budget");
    setup.inputs.verify_budget = *parsed;
  }
  return setup;
}

Status InContext(const Status& s, const BenchMode& mode) {
  return s.ok() ? s : s.WithContext("mode " + mode.label + DrafterFlags(mode.drafter));
}

}  // namespace

Status CheckInProcessModes(const InProcessModels& models, std::span<const BenchMode> modes) {
  for (const BenchMode& mode : modes) {
    if (!mode.runnable) continue;
    DSCALE_ASSIGN_OR_RETURN(const ModeSetup setup, SetUp(models, mode));
    const Drafter* drafter = setup.backend->drafter();
    DSCALE_RETURN_IF_ERROR(
        InContext(CheckPolicyInputs({.policy = setup.policy,
                                     .block = drafter != nullptr ? drafter->block_size() : 0,
                                     .drafter_confidence =
                                         drafter != nullptr && drafter->has_confidence_head(),
                                     .inputs = setup.inputs}),
                  mode));
    DSCALE_RETURN_IF_ERROR(
        InContext(CheckDraftSampling(models.draft_sampling, setup.policy, *setup.backend), mode));
  }
  return Status::Ok();
}

Result<RunMetrics> RunInProcessCell(const InProcessModels& models, const BenchMode& mode,
                                    const CellRequests& requests, int32_t concurrency,
                                    const GenerationParams& params,
                                    const std::function<void()>& on_done, StepTrace* trace) {
  DSCALE_ASSIGN_OR_RETURN(ModeSetup setup, SetUp(models, mode));
  const int64_t per_request = requests.longest_prompt + params.max_tokens + kKvSlackPerRequest;
  EngineConfig config{.policy = setup.policy,
                      .max_running = concurrency,
                      .kv_tokens = std::max<int64_t>(per_request * concurrency, 1 << 12),
                      .kv_dtype = models.kv_dtype,
                      .prefix_cache = models.prefix_cache,
                      .tile_routing = mode.tile_routing,
                      .mixed_prefill = models.mixed_prefill,
                      .prompt_wait_steps = models.prompt_wait_steps,
                      .draft_sampling = models.draft_sampling,
                      .inputs = setup.inputs,
                      .step_trace = trace};
  Result<std::unique_ptr<Engine>> created = Engine::Create(*setup.backend, std::move(config));
  if (!created.ok()) return InContext(created.status(), mode);
  std::unique_ptr<Engine> engine = std::move(created).value();
  DSCALE_RETURN_IF_ERROR(
      RunEngineLoop(*engine, requests.warmup, {.concurrency = concurrency}, params, on_done)
          .status());
  const StepStats before = engine->stats();
  DSCALE_ASSIGN_OR_RETURN(
      LoopOutcome measured,
      RunEngineLoop(*engine, requests.measured,
                    {.concurrency = concurrency, .arrivals = requests.arrivals}, params, on_done));
  return InProcessMetrics(measured, engine->stats().Since(before));
}

}  // namespace dscale::bench
