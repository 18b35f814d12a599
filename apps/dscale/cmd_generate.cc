// dscale generate: runs prompts through the engine with a length policy and prints outputs.

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "budget_options.h"
#include "cli_util.h"
#include "commands.h"
#include "default_spec.h"
#include "engine/engine.h"
#include "io/file_util.h"
#include "io/tokenizer/display_text.h"
#include "model_options.h"
#include "prompt_input.h"
#include "runtime.h"
#include "spec/json_schema.h"

namespace dscale::cli {
namespace {

struct GenerateArgs {
  ModelOptions models;
  std::string spec;  // empty until ApplyDefaultSpec or --spec sets it
  PromptFlags prompts;
  std::vector<std::string> stop;
  int32_t max_tokens = 64;
  float temperature = 0.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;
  float min_p = 0.0f;
  uint64_t seed = 0;
  LogitRules rules;                     // the penalties; its logit_bias from --logit-bias
  std::vector<std::string> logit_bias;  // --logit-bias ID=BIAS, repeatable
  bool json_object = false;             // --json-object
  std::string json_schema;              // --json-schema FILE; empty: none
  int32_t concurrency = 1;
  int64_t kv_tokens = 0;  // 0: sized to the prompts (KvTokensForPrompts)
  KvDtype kv_dtype = KvDtype::kBf16;
  BudgetFlags budget;
  bool tile_routing = true;
  bool mixed_prefill = true;
  int32_t prompt_wait_steps = EngineConfig{}.prompt_wait_steps;
  bool json = false;
  std::string step_trace;  // --step-trace FILE; empty: none
};

nlohmann::json StatsJson(const StepStats& s, double seconds, const std::string& mode) {
  return {{"mode", mode},
          {"seconds", seconds},
          {"output_tokens", s.output_tokens},
          {"tokens_per_second", seconds > 0 ? s.output_tokens / seconds : 0.0},
          {"decode_steps", s.decode_steps},
          {"tau", s.tau()},
          {"verified_rows_per_step", s.rows_per_step()},
          {"prefill_rows", s.prefill_rows},
          {"mixed_prefill_rows", s.mixed_prefill_rows},  // of them, run in a verify's pass
          {"prompt_wait_steps", s.prompt_wait_steps},    // decode steps pending prompts waited
          {"step_time_s",
           {{"prefill", s.prefill_s},
            {"draft", s.draft_s},
            {"decision", s.decision_s},
            {"verify", s.verify_s},
            {"acceptance", s.acceptance_s},
            {"commit", s.commit_s}}}};
}

nlohmann::json StatsJsonWithBudget(const StepStats& s, double seconds, const std::string& mode) {
  nlohmann::json j = StatsJson(s, seconds, mode);
  if (s.auto_budget) j["auto_budget"] = AutoBudgetJson(*s.auto_budget);
  return j;
}

// The output as text (when a tokenizer is known), cut before the first stop string.
std::optional<std::string> OutputText(const RequestResult& r, const Tokenizer* tokenizer,
                                      const std::vector<std::string>& stops) {
  if (tokenizer == nullptr) return std::nullopt;
  std::string text = DisplayText(*tokenizer, r.output_ids, {.skip_special = true});
  for (const std::string& stop : stops) {
    const size_t at = text.find(stop);
    if (at != std::string::npos) text.resize(at);
  }
  return text;
}

void PrintText(const std::vector<RequestResult>& results, const Tokenizer* tokenizer,
               const std::vector<std::string>& stops, const StepStats& stats, double seconds,
               const std::string& mode) {
  for (const RequestResult& r : results) {
    std::printf("request %llu (%s):", static_cast<unsigned long long>(r.id),
                FinishReasonName(r.finish_reason));
    if (!r.error.empty()) std::printf(" %s;", r.error.c_str());
    if (const std::optional<std::string> text = OutputText(r, tokenizer, stops)) {
      std::printf("\n%s\n", text->c_str());
      continue;
    }
    for (int32_t t : r.output_ids) std::printf(" %d", t);
    std::printf("\n");
  }
  std::printf("%lld tokens in %.3f s (%.1f tokens/s), mode %s, tau %.2f, %.1f rows/step\n",
              static_cast<long long>(stats.output_tokens), seconds,
              seconds > 0 ? stats.output_tokens / seconds : 0.0, mode.c_str(), stats.tau(),
              stats.rows_per_step());
}

void PrintJson(const std::vector<RequestResult>& results, const Tokenizer* tokenizer,
               const std::vector<std::string>& stops, const StepStats& stats, double seconds,
               const std::string& mode) {
  nlohmann::json requests = nlohmann::json::array();
  for (const RequestResult& r : results) {
    nlohmann::json request = {{"output_ids", r.output_ids},
                              {"finish_reason", FinishReasonName(r.finish_reason)},
                              {"steps", r.steps},
                              {"accepted", r.accepted}};
    if (!r.error.empty()) request["error"] = r.error;
    if (const std::optional<std::string> text = OutputText(r, tokenizer, stops)) {
      request["text"] = *text;
    }
    requests.push_back(std::move(request));
  }
  std::cout << nlohmann::json{{"requests", requests},
                              {"stats", StatsJsonWithBudget(stats, seconds, mode)}}
                   .dump()
            << "\n";
}

// Stop strings read the output as generate prints it (DisplayText), special tokens included.
std::string_view DisplayTokenText(const Tokenizer& tokenizer, int32_t id) {
  const std::string* token = tokenizer.TokenBytes(id);
  return token != nullptr ? std::string_view(*token) : std::string_view();
}

// --logit-bias ID=BIAS flags as (token, bias) pairs, tokens ascending; the ranges are the engine's
// check (spec/logit_rules.h).
Result<std::vector<std::pair<int32_t, float>>> ParseLogitBias(
    const std::vector<std::string>& flags) {
  std::vector<std::pair<int32_t, float>> bias;
  for (const std::string& flag : flags) {
    const size_t eq = flag.find('=');
    int32_t token = 0;
    float value = 0.0f;
    const char* end = flag.data() + flag.size();
    const auto id = std::from_chars(flag.data(), flag.data() + std::min(eq, flag.size()), token);
    const auto number =
        eq == std::string::npos ? id : std::from_chars(flag.data() + eq + 1, end, value);
    if (eq == std::string::npos || id.ec != std::errc() || id.ptr != flag.data() + eq ||
        number.ec != std::errc() || number.ptr != end || eq + 1 == flag.size()) {
      return InvalidArgument("--logit-bias: expected TOKEN_ID=BIAS, got \"" + flag + "\"");
    }
    bias.emplace_back(token, value);
  }
  std::ranges::sort(bias);
  for (size_t i = 1; i < bias.size(); ++i) {
    if (bias[i].first == bias[i - 1].first) {
      return InvalidArgument("--logit-bias: token " + std::to_string(bias[i].first) +
                             " is given twice");
    }
  }
  return bias;
}

// --json-object's schema (any object), --json-schema's compiled, or none.
Result<std::shared_ptr<const JsonSchema>> JsonModeSchema(const GenerateArgs& args) {
  if (args.json_object && !args.json_schema.empty()) {
    return InvalidArgument("--json-object and --json-schema: give one");
  }
  if (args.json_object) return JsonSchema::AnyObject();
  if (args.json_schema.empty()) return std::shared_ptr<const JsonSchema>();
  DSCALE_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(args.json_schema));
  const auto schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return InvalidArgument(args.json_schema + ": not valid JSON");
  return JsonSchema::Compile(schema, args.json_schema);
}

// Submits every prompt (prompt i samples with seed + i); maps each request to its prompt's index.
Result<std::map<RequestId, size_t>> SubmitAll(Engine& engine, const GenerateArgs& args,
                                              const std::vector<std::vector<int32_t>>& prompts,
                                              const DecoderModel& target) {
  LogitRules rules = args.rules;
  DSCALE_ASSIGN_OR_RETURN(rules.logit_bias, ParseLogitBias(args.logit_bias));
  DSCALE_ASSIGN_OR_RETURN(rules.json_schema, JsonModeSchema(args));
  GenerationParams params{.max_tokens = args.max_tokens,
                          .sampling = {.temperature = args.temperature,
                                       .top_k = args.top_k,
                                       .top_p = args.top_p,
                                       .min_p = args.min_p,
                                       .seed = args.seed,
                                       .rules = std::move(rules)},
                          .stop_ids = target.config().eos_token_ids,
                          .stop_strings = args.stop};
  std::map<RequestId, size_t> order;
  for (size_t i = 0; i < prompts.size(); ++i) {
    params.sampling.seed = args.seed + i;
    Result<RequestId> id = engine.Submit(prompts[i], params);
    if (!id.ok()) return id.status().WithContext("prompt " + std::to_string(i + 1));
    order[*id] = i;
  }
  return order;
}

// The finished requests in prompt order.
std::vector<RequestResult> TakeInPromptOrder(Engine& engine,
                                             const std::map<RequestId, size_t>& order) {
  std::vector<RequestResult> results = engine.TakeFinished();
  std::sort(results.begin(), results.end(), [&](const RequestResult& a, const RequestResult& b) {
    return order.at(a.id) < order.at(b.id);
  });
  return results;
}

int RunGenerate(const GenerateArgs& args) {
  auto fail = [](const Status& s) { return ReportError("generate", s); };
  Result<LengthPolicy> policy = LengthPolicy::Parse(args.spec);
  if (!policy.ok()) return fail(policy.status());
  Result<std::unique_ptr<Runtime>> runtime =
      LoadRuntime(args.models, PartsFor(*policy, TokenizerNeed::kIfFound));
  if (!runtime.ok()) return fail(runtime.status());
  Runtime& rt = **runtime;
  const Tokenizer* tok = rt.tokenizer_or_null();
  Result<std::vector<std::vector<int32_t>>> prompts = LoadPrompts(args.prompts, tok);
  if (!prompts.ok()) return fail(prompts.status());
  Result<std::unique_ptr<StepTrace>> trace = OpenStepTrace(args.step_trace);
  if (!trace.ok()) return fail(trace.status());
  Result<std::unique_ptr<Engine>> engine =
      MakeEngine(rt,
                 {.policy = *policy,
                  .max_running = args.concurrency,
                  .kv_tokens = KvTokensForPrompts(args.kv_tokens, *prompts, args.concurrency,
                                                  args.max_tokens, rt.main.block_size()),
                  .kv_dtype = args.kv_dtype,
                  .tile_routing = args.tile_routing,
                  .mixed_prefill = args.mixed_prefill,
                  .prompt_wait_steps = args.prompt_wait_steps,
                  .draft_sampling = args.models.draft_sampling,
                  .step_trace = trace->get()},
                 {.budget = &args.budget, .token_text_of = &DisplayTokenText});
  if (!engine.ok()) return fail(engine.status());
  Result<std::map<RequestId, size_t>> order = SubmitAll(**engine, args, *prompts, *rt.target);
  if (!order.ok()) return fail(order.status());
  const auto start = std::chrono::steady_clock::now();
  if (Status s = (*engine)->RunToCompletion(); !s.ok()) return fail(s);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto print = args.json ? PrintJson : PrintText;
  print(TakeInPromptOrder(**engine, *order), tok, args.stop, (*engine)->stats(), seconds,
        policy->Name());
  return 0;
}

}  // namespace

void RegisterGenerateCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate with a length policy");
  AddModelOptions(cmd, &args->models, {});
  cmd->add_option("--spec", args->spec,
                  "Length policy: none, dflash, fixed:K, dscale, dspark (default: dscale with "
                  "--verify-budget auto when the drafter folder has a predictor or --predictor is "
                  "given, dflash without one, none without --drafter)");
  cmd->add_option("--ids", args->prompts.ids, "Prompt as comma-separated token ids");
  cmd->add_option("--prompt", args->prompts.prompt, "Prompt text (one user chat turn)");
  cmd->add_option(
      "--prompts", args->prompts.prompts_file,
      "JSONL file: {\"prompt\": ...}, {\"messages\": [...]} or {\"ids\": [...]} per line");
  cmd->add_flag("--raw", args->prompts.raw, "Encode text prompts as is, without the chat template");
  cmd->add_option("--stop", args->stop, "Stop string (repeatable)");
  cmd->add_option("--max-tokens", args->max_tokens, "Tokens to generate at most")
      ->check(AtLeast(1))
      ->capture_default_str();
  cmd->add_option("--temperature", args->temperature, "0: greedy")->capture_default_str();
  cmd->add_option("--top-p", args->top_p, "Nucleus mass")->capture_default_str();
  cmd->add_option("--top-k", args->top_k, "0: off")->capture_default_str();
  cmd->add_option("--min-p", args->min_p, "Keep tokens at least this times as likely as the top")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Sampling seed")->capture_default_str();
  cmd->add_option("--presence-penalty", args->rules.presence_penalty,
                  "Subtracted from the logit of every token the output holds [-2, 2]")
      ->capture_default_str();
  cmd->add_option("--frequency-penalty", args->rules.frequency_penalty,
                  "Subtracted per occurrence in the output [-2, 2]")
      ->capture_default_str();
  cmd->add_option(
         "--repetition-penalty", args->rules.repetition_penalty,
         "Divides positive, multiplies negative logits of prompt and output tokens, 0.01 to 100 "
         "(1: off)")
      ->capture_default_str();
  cmd->add_option("--min-tokens", args->rules.min_tokens,
                  "No stop id (EOS) ends an output before it holds this many tokens")
      ->capture_default_str();
  cmd->add_flag("--json-object", args->json_object,
                "JSON mode: hold each output to a JSON object's text (it ends once the object "
                "closes)");
  cmd->add_option("--json-schema", args->json_schema,
                  "JSON mode held to the JSON Schema in FILE (what it supports: "
                  "src/spec/json_schema.h)");
  cmd->add_option("--logit-bias", args->logit_bias,
                  "TOKEN_ID=BIAS added to that token's logit, -100 to 100 (repeatable)");
  cmd->add_option("--concurrency", args->concurrency, "Running requests at most (c)")
      ->check(InRange(1, kMaxRunningRequests))
      ->capture_default_str();
  cmd->add_option("--kv-tokens", args->kv_tokens,
                  "KV cache capacity in positions (default: what the prompts need at once)")
      ->check(AtLeast(0));
  AddKvDtypeOption(cmd, &args->kv_dtype);
  AddBudgetOptions(cmd, &args->budget);
  cmd->add_option("--tile-routing", args->tile_routing,
                  "on: 16-row attention tile for drafting and verification; off: 128 everywhere")
      ->capture_default_str();
  AddMixedPrefillFlag(cmd, &args->mixed_prefill);
  AddPromptWaitOption(cmd, &args->prompt_wait_steps);
  cmd->add_flag("--json", args->json, "Print JSON");
  AddStepTraceOption(cmd, &args->step_trace);
  cmd->callback([args, exit_code, cmd] {
    ApplyDefaultSpec(*cmd, "generate", args->models.drafter, args->models.predictor,
                     args->models.drafter_head, &args->spec, &args->budget);
    *exit_code = RunGenerate(*args);
  });
}

}  // namespace dscale::cli
