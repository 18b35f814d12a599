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

Result<RunMetrics> RunInProcessCell(const InProcessModels& models, const BenchMode& mode,
                                    const CellRequests& requests, int32_t concurrency,
                                    const GenerationParams& params,
                                    const std::function<void()>& on_done) {
  DSCALE_ASSIGN_OR_RETURN(LengthPolicy policy, LengthPolicy::Parse(mode.policy));
  StepBackend* backend = mode.domino_head ? models.domino_backend : models.backend;
  Drafter* drafter = backend != nullptr ? backend->drafter() : nullptr;
  const dvl::Predictor* predictor = mode.domino_head ? models.domino_predictor : models.predictor;
  if (policy.UsesDrafter() && drafter == nullptr) {
    return InvalidArgument(
        "mode " + mode.label +
        (mode.domino_head ? " needs a --drafter with a Domino head" : " needs --drafter"));
  }
  if (backend == nullptr) return InvalidArgument("mode " + mode.label + " has no models to run");
  if (policy.UsesPredictor() && predictor == nullptr) {
    return InvalidArgument("mode " + mode.label +
                           (mode.domino_head ? " needs --domino-predictor" : " needs --predictor"));
  }
  if (policy.mode == SpecMode::kDSpark && models.sps_table == nullptr) {
    return InvalidArgument("mode " + mode.label + " needs a steps-per-second table");
  }
  budget::VerifyBudget verify_budget = models.verify_budget;
  if (!mode.verify_budget.empty()) {
    DSCALE_ASSIGN_OR_RETURN(verify_budget, budget::VerifyBudget::Parse(mode.verify_budget));
  }
  const int64_t per_request = requests.longest_prompt + params.max_tokens + kKvSlackPerRequest;
  EngineConfig config{.policy = policy,
                      .max_running = concurrency,
                      .kv_tokens = std::max<int64_t>(per_request * concurrency, 1 << 12),
                      .kv_dtype = models.kv_dtype,
                      .prefix_cache = models.prefix_cache,
                      .tile_routing = mode.tile_routing,
                      .predictor = predictor,
                      .verify_budget = verify_budget,
                      .sps_table = models.sps_table};
  DSCALE_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                          Engine::Create(*backend, std::move(config)));
  DSCALE_RETURN_IF_ERROR(
      RunClosedLoop(*engine, requests.warmup, concurrency, params, on_done).status());
  const StepStats before = engine->stats();
  DSCALE_ASSIGN_OR_RETURN(LoopOutcome measured,
                          RunClosedLoop(*engine, requests.measured, concurrency, params, on_done));
  return InProcessMetrics(measured, StatsDelta(engine->stats(), before));
}

}  // namespace dscale::bench
