// dscale generate: runs prompts through the engine with a length policy and prints outputs.

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli_util.h"
#include "commands.h"
#include "engine/engine.h"
#include "model/dflash_drafter.h"

namespace dscale::cli {
namespace {

struct GenerateArgs {
  std::string target;
  std::string drafter;
  std::string spec = "dflash";
  std::string ids;
  int32_t max_tokens = 64;
  float temperature = 0.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;
  uint64_t seed = 0;
  int32_t concurrency = 1;
  bool tile_routing = true;
  bool json = false;
};

nlohmann::json StatsJson(const StepStats& s, double seconds, const std::string& mode) {
  return {{"mode", mode},
          {"seconds", seconds},
          {"output_tokens", s.output_tokens},
          {"tokens_per_second", seconds > 0 ? s.output_tokens / seconds : 0.0},
          {"decode_steps", s.decode_steps},
          {"tau", s.tau()},
          {"verified_rows_per_step", s.rows_per_step()},
          {"step_time_s",
           {{"prefill", s.prefill_s},
            {"draft", s.draft_s},
            {"decision", s.decision_s},
            {"verify", s.verify_s},
            {"acceptance", s.acceptance_s},
            {"commit", s.commit_s}}}};
}

void PrintText(const std::vector<RequestResult>& results, const StepStats& stats, double seconds,
               const std::string& mode) {
  for (const RequestResult& r : results) {
    std::printf("request %llu (%s):", static_cast<unsigned long long>(r.id),
                FinishReasonName(r.finish_reason));
    for (int32_t t : r.output_ids) std::printf(" %d", t);
    std::printf("\n");
  }
  std::printf("%lld tokens in %.3f s (%.1f tokens/s), mode %s, tau %.2f, %.1f rows/step\n",
              static_cast<long long>(stats.output_tokens), seconds,
              seconds > 0 ? stats.output_tokens / seconds : 0.0, mode.c_str(), stats.tau(),
              stats.rows_per_step());
}

int RunGenerate(const GenerateArgs& args) {
  Result<LengthPolicy> policy = LengthPolicy::Parse(args.spec);
  if (!policy.ok()) return ReportError("generate", policy.status());
  Result<std::vector<int32_t>> ids = ParseIdList(args.ids, "--ids");
  if (!ids.ok()) return ReportError("generate", ids.status());
  Result<Qwen3Model> target = Qwen3Model::Load(args.target);
  if (!target.ok()) return ReportError("generate", target.status());
  std::optional<DFlashDrafter> drafter;
  if (policy->UsesDrafter()) {
    if (args.drafter.empty()) {
      return ReportError("generate", InvalidArgument("--spec " + args.spec + " needs --drafter"));
    }
    Result<DFlashDrafter> loaded = DFlashDrafter::Load(args.drafter, *target);
    if (!loaded.ok()) return ReportError("generate", loaded.status());
    drafter.emplace(std::move(loaded).value());
  }
  Result<std::unique_ptr<Engine>> engine = Engine::Create(
      *target, drafter ? &*drafter : nullptr,
      {.policy = *policy, .max_running = args.concurrency, .tile_routing = args.tile_routing});
  if (!engine.ok()) return ReportError("generate", engine.status());

  const GenerationParams params{.max_tokens = args.max_tokens,
                                .sampling = {.temperature = args.temperature,
                                             .top_k = args.top_k,
                                             .top_p = args.top_p,
                                             .seed = args.seed},
                                .stop_ids = target->config().eos_token_ids};
  if (Result<RequestId> id = (*engine)->Submit(*ids, params); !id.ok()) {
    return ReportError("generate", id.status());
  }
  const auto start = std::chrono::steady_clock::now();
  if (Status s = (*engine)->RunToCompletion(); !s.ok()) return ReportError("generate", s);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::vector<RequestResult> results = (*engine)->TakeFinished();
  const StepStats& stats = (*engine)->stats();
  if (!args.json) {
    PrintText(results, stats, seconds, policy->Name());
    return 0;
  }
  nlohmann::json requests = nlohmann::json::array();
  for (const RequestResult& r : results) {
    requests.push_back({{"output_ids", r.output_ids},
                        {"finish_reason", FinishReasonName(r.finish_reason)},
                        {"steps", r.steps},
                        {"accepted", r.accepted}});
  }
  std::cout << nlohmann::json{{"requests", requests},
                              {"stats", StatsJson(stats, seconds, policy->Name())}}
                   .dump()
            << "\n";
  return 0;
}

}  // namespace

void RegisterGenerateCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate with a length policy");
  cmd->add_option("--target", args->target, "Target checkpoint directory")->required();
  cmd->add_option("--drafter", args->drafter, "DFlash drafter checkpoint directory");
  cmd->add_option("--spec", args->spec, "Length policy: none, dflash, fixed:K, dscale")
      ->capture_default_str();
  cmd->add_option("--ids", args->ids, "Prompt as comma-separated token ids")->required();
  cmd->add_option("--max-tokens", args->max_tokens, "Tokens to generate at most")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--temperature", args->temperature, "0: greedy")->capture_default_str();
  cmd->add_option("--top-p", args->top_p, "Nucleus mass")->capture_default_str();
  cmd->add_option("--top-k", args->top_k, "0: off")->capture_default_str();
  cmd->add_option("--seed", args->seed, "Sampling seed")->capture_default_str();
  cmd->add_option("--concurrency", args->concurrency, "Running requests at most (c)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--tile-routing", args->tile_routing,
                  "on: 16-row attention tile for drafting and verification; off: 128 everywhere")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print JSON");
  cmd->callback([args, exit_code] { *exit_code = RunGenerate(*args); });
}

}  // namespace dscale::cli
