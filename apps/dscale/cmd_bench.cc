// dscale bench: the serving benchmark. Closed-loop clients (or open-loop arrivals, --request-rate)
// over fixed request manifests, for every (mode, dataset, concurrency) cell, on an in-process
// engine or a running server (--url); a table on the terminal, and JSON, CSV and PNG plots with
// --out.

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "bench/compare.h"
#include "bench/datasets.h"
#include "bench/http_client.h"
#include "bench/in_process.h"
#include "bench/plots.h"
#include "bench/sweep.h"
#include "budget_options.h"
#include "cli_util.h"
#include "commands.h"
#include "model_options.h"
#include "runtime.h"

namespace dscale::cli {
namespace {

using bench::BenchMode;

struct BenchArgs {
  ModelOptions models;
  std::string domino_predictor;         // the domino+dscale mode's predictor
  std::string dspark_drafter;           // the dspark-drafter modes' drafter folder
  std::string dspark_predictor;         // their dscale modes' predictor
  std::string step_trace;               // --step-trace DIR; empty: none
  std::string url, server_model;        // --server-model; empty: the one model the server lists
  std::string server_prompts = "text";  // --url: chat turns as text, or token ids (`ids`)
  std::string data_dir = "data";
  std::string datasets = "gsm8k,math500,humaneval,mbpp";
  std::string concurrency = "8,16,32";
  std::string modes = "none,dflash,fixed:8,dscale";
  std::string widths;
  bool ablation = false;
  std::string baseline;
  std::string tile_routing = "auto";
  KvDtype kv_dtype = KvDtype::kBf16;
  int32_t warmup = 32, requests = 512, distinct = 256, max_tokens = 2048, repeats = 1;
  double request_rate = 0;  // open loop: Poisson arrivals a second; 0: closed loop
  float temperature = 0.0f;
  uint64_t seed = 0;
  BudgetFlags budget;
  bool profile = false, no_progress = false;
  int32_t shared_prefix_tokens = 0;  // a system turn of about this many tokens before every prompt
  bool prefix_cache = false;
  bool mixed_prefill = true;
  int32_t prompt_wait_steps = EngineConfig{}.prompt_wait_steps;
  std::string out;
  std::string compare;  // an earlier run's results.json
  bool modes_given = false;
};

Result<std::vector<BenchMode>> SelectModes(const BenchArgs& a) {
  if (a.ablation && !a.widths.empty()) return InvalidArgument("--ablation and --widths clash");
  if (!a.url.empty() && (a.ablation || !a.widths.empty())) {
    return InvalidArgument("--ablation and --widths switch engine settings: run them in process");
  }
  if (a.ablation) return bench::AblationModes(/*graphs_available=*/false);
  if (!a.widths.empty()) return bench::WidthModes(a.widths);
  if (!a.url.empty()) {
    // The server's own configuration decides the policy; the mode only labels the rows.
    if (!a.modes_given) return std::vector<BenchMode>{{.label = "server", .policy = "none"}};
    const std::vector<std::string> labels = bench::SplitList(a.modes);
    if (labels.size() != 1) return InvalidArgument("--url: give one --modes label per server");
    return std::vector<BenchMode>{{.label = labels[0], .policy = "none"}};
  }
  const std::map<std::string, bench::TileRouting> tiles = {{"auto", bench::TileRouting::kAuto},
                                                           {"on", bench::TileRouting::kOn},
                                                           {"off", bench::TileRouting::kOff}};
  DSCALE_ASSIGN_OR_RETURN(std::vector<BenchMode> modes,
                          bench::ParseModes(a.modes, tiles.at(a.tile_routing)));
  // A plain dscale mode takes --verify-budget; with auto its budget moves during the run.
  const bool automatic = a.budget.VerifyBudget().value().automatic;
  for (BenchMode& m : modes) {
    m.adaptive |= automatic && m.policy == "dscale" && m.verify_budget.empty();
  }
  return modes;
}

std::string DefaultBaseline(const std::vector<BenchMode>& modes) {
  for (const BenchMode& m : modes) {
    if (m.runnable && m.label == "dflash") return m.label;
  }
  return modes.front().label;
}

// What the in-process modes load: the drafter without a head for the speculative modes, with
// its Domino head (a variant on the CPU) for the domino modes, --dspark-drafter (another variant)
// for the dspark-drafter modes, and each one's predictor for the modes that predict (not for
// dspark over a drafter with a confidence head, which ranks by the head).
Result<RuntimeParts> PartsForModes(const BenchArgs& a, const std::vector<BenchMode>& modes) {
  struct Need {
    bool drafter = false, predictor = false;
    // Whether every mode wanting the predictor could rank by a confidence head instead.
    bool confidence_replaces_predictor = true;
  };
  std::map<bench::ModeDrafter, Need> need;
  for (const BenchMode& m : modes) {
    if (!m.runnable) continue;
    DSCALE_ASSIGN_OR_RETURN(const LengthPolicy policy, LengthPolicy::Parse(m.policy));
    Need& n = need[m.drafter];
    n.drafter |= policy.UsesDrafter() || m.drafter != bench::ModeDrafter::kMain;
    n.predictor |= policy.UsesPredictor();
    if (policy.UsesPredictor()) n.confidence_replaces_predictor &= policy.RanksByConfidenceHead();
  }
  const ModelOptions& o = a.models;
  for (auto [drafter, name] : {std::pair{bench::ModeDrafter::kDomino, "domino"},
                               std::pair{bench::ModeDrafter::kDSpark, "dspark-drafter"}}) {
    if (need.count(drafter) && o.device != "cpu") {
      return InvalidArgument(std::string("the ") + name + " modes run on the CPU only (--device cpu)");
    }
  }
  if (o.target.empty()) return InvalidArgument("--target is required without --url");
  // Without --drafter (--dspark-drafter) nothing is loaded for the modes that need one, and
  // CheckInProcessModes names them.
  const Need main = need[bench::ModeDrafter::kMain];
  RuntimeParts parts{.drafter = main.drafter,
                     .predictor = main.predictor,
                     .confidence_replaces_predictor = main.confidence_replaces_predictor};
  if (need.count(bench::ModeDrafter::kDomino) && !o.drafter.empty()) {
    parts.variant = DrafterVariantParts{.head = DrafterHead::kDomino,
                                        .predictor = need[bench::ModeDrafter::kDomino].predictor,
                                        .predictor_file = a.domino_predictor,
                                        .predictor_flag = "--domino-predictor"};
  }
  if (const Need dspark = need[bench::ModeDrafter::kDSpark];
      dspark.drafter && !a.dspark_drafter.empty()) {
    parts.dspark = DrafterVariantParts{
        .drafter_dir = a.dspark_drafter,
        .head = DrafterHead::kNone,
        .predictor = dspark.predictor && !dspark.confidence_replaces_predictor,
        .predictor_file = a.dspark_predictor,
        .predictor_flag = "--dspark-predictor"};
  }
  return parts;
}

// The models every cell shares, and dspark's table for the largest cell: W · the largest
// concurrency.
Result<std::unique_ptr<Runtime>> LoadModels(const BenchArgs& a, const std::vector<BenchMode>& modes,
                                            const std::vector<int32_t>& concurrency) {
  DSCALE_ASSIGN_OR_RETURN(const RuntimeParts parts, PartsForModes(a, modes));
  DSCALE_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, LoadRuntime(a.models, parts));
  if (!runtime->tokenizer) {  // the datasets' prompts are text
    return InvalidArgument("no tokenizer: pass --tokenizer (the target folder has none)");
  }
  bool need_sps = false;
  for (const BenchMode& mode : modes) need_sps |= mode.runnable && mode.policy == "dspark";
  int32_t most = 1;
  for (int32_t c : concurrency) most = std::max(most, c);
  // One table for every dspark mode: up to the widest block of the drafters they verify.
  const int32_t widest =
      std::max(runtime->main.block_size(), runtime->dspark ? runtime->dspark->block_size() : 1);
  DSCALE_RETURN_IF_ERROR(PrepareSpsTable(*runtime, a.budget, need_sps, int64_t{widest} * most));
  return runtime;
}

struct Workload {
  std::vector<bench::Dataset> datasets;  // in --datasets order
  std::vector<bench::Manifest> manifests;
  std::string system;  // the shared-prefix workload's system turn (empty: none)
};

Result<Workload> LoadWorkload(const BenchArgs& a) {
  Workload w;
  for (const std::string& name : bench::SplitList(a.datasets)) {
    DSCALE_ASSIGN_OR_RETURN(bench::Dataset d, bench::LoadDataset(a.data_dir, name, a.distinct));
    w.manifests.push_back(
        bench::BuildManifest(static_cast<int32_t>(d.prompts.size()), a.warmup, a.requests, a.seed));
    w.datasets.push_back(std::move(d));
  }
  if (w.datasets.empty()) return InvalidArgument("--datasets: empty list");
  return w;
}

size_t IndexOf(const Workload& w, const std::string& dataset) {
  for (size_t i = 0; i < w.datasets.size(); ++i) {
    if (w.datasets[i].name == dataset) return i;
  }
  return 0;
}

// A mode label as part of a file name: "dscale:auto" → "dscale_auto".
std::string FileNamePart(std::string label) {
  for (char& ch : label) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-') ch = '_';
  }
  return label;
}

// The measured requests' arrival times: an open loop at --request-rate, the same for every cell
// (PoissonArrivals); none for a closed loop.
std::vector<double> MeasuredArrivals(const BenchArgs& a) {
  return a.request_rate > 0 ? bench::PoissonArrivals(a.requests, a.request_rate, a.seed)
                            : std::vector<double>();
}

Result<bench::CellRunner> InProcessRunner(const BenchArgs& a, const std::vector<BenchMode>& modes,
                                          const Workload& w, Runtime& m) {
  auto cells = std::make_shared<std::vector<bench::CellRequests>>();
  for (size_t i = 0; i < w.datasets.size(); ++i) {
    DSCALE_ASSIGN_OR_RETURN(
        auto ids, bench::EncodeChatPrompts(*m.tokenizer, w.datasets[i].prompts, w.system));
    cells->push_back(bench::ManifestRequests(w.manifests[i], ids, a.seed));
    cells->back().arrivals = MeasuredArrivals(a);
  }
  const auto models_of = [](const std::optional<Drafting>& d) {
    return d ? bench::ModeModels{.backend = d->backend.get(),
                                 .predictor = d->predictor_or_null(),
                                 .confidence_calibration = d->confidence_calibration_or_null()}
             : bench::ModeModels{};
  };
  const bench::InProcessModels models{
      .main = {.backend = m.main.backend.get(),
               .predictor = m.main.predictor_or_null(),
               .confidence_calibration = m.main.confidence_calibration_or_null()},
      .domino = models_of(m.variant),
      .dspark = models_of(m.dspark),
      .verify_budget = a.budget.VerifyBudget().value(),
      .sps_table = m.sps_table ? &*m.sps_table : nullptr,
      .kv_dtype = a.kv_dtype,
      .prefix_cache = a.prefix_cache,
      .mixed_prefill = a.mixed_prefill,
      .prompt_wait_steps = a.prompt_wait_steps,
      .draft_sampling = a.models.draft_sampling};
  const GenerationParams params{.max_tokens = a.max_tokens,
                                .sampling = {.temperature = a.temperature},
                                .stop_ids = m.target->config().eos_token_ids};
  DSCALE_RETURN_IF_ERROR(bench::CheckInProcessModes(models, modes));
  // --step-trace DIR: a trace per cell run, DIR/<dataset>-c<c>-<mode>-<run>.jsonl.
  auto runs = std::make_shared<std::map<std::string, int>>();
  return bench::CellRunner([=, &w](
                               const BenchMode& mode, const std::string& dataset, int32_t c,
                               const std::function<void()>& on_done) -> Result<bench::RunMetrics> {
    std::unique_ptr<StepTrace> trace;
    if (!a.step_trace.empty()) {
      const std::string key = dataset + "-c" + std::to_string(c) + "-" + FileNamePart(mode.label);
      const std::string path = (std::filesystem::path(a.step_trace) /
                                (key + "-" + std::to_string((*runs)[key]++) + ".jsonl"))
                                   .string();
      DSCALE_ASSIGN_OR_RETURN(trace, StepTrace::Open(path));
    }
    return bench::RunInProcessCell(models, mode, (*cells)[IndexOf(w, dataset)], c, params, on_done,
                                   trace.get());
  });
}

// With --server-prompts ids: every prompt's chat turns encoded by the tokenizer --tokenizer (or
// the --target folder) names, as in-process runs encode them, so every server sees the same
// tokens whatever chat template it would apply; otherwise none.
Result<std::vector<std::vector<std::vector<int32_t>>>> ServerPromptIds(const BenchArgs& a,
                                                                       const Workload& w) {
  std::vector<std::vector<std::vector<int32_t>>> ids(w.datasets.size());
  if (a.server_prompts != "ids") return ids;
  if (a.models.tokenizer.empty() && a.models.target.empty()) {
    return InvalidArgument("--server-prompts ids needs --tokenizer (or --target) to encode them");
  }
  const std::string folder = a.models.tokenizer.empty() ? a.models.target : a.models.tokenizer;
  Result<Tokenizer> tokenizer = Tokenizer::Load(folder);
  if (!tokenizer.ok()) return tokenizer.status().WithContext("--server-prompts ids");
  for (size_t i = 0; i < w.datasets.size(); ++i) {
    DSCALE_ASSIGN_OR_RETURN(ids[i],
                            bench::EncodeChatPrompts(*tokenizer, w.datasets[i].prompts, w.system));
  }
  return ids;
}

Result<bench::CellRunner> ServerRunner(const BenchArgs& a, const Workload& w) {
  bench::ServerTarget target{.url = a.url, .model = a.server_model};
  if (target.model.empty()) {
    Result<std::string> served = bench::ServedModelId(a.url);
    if (!served.ok()) return served.status().WithContext("--server-model not given");
    target.model = *served;
  }
  DSCALE_ASSIGN_OR_RETURN(const auto prompt_ids, ServerPromptIds(a, w));
  auto split = std::make_shared<
      std::vector<std::pair<std::vector<bench::ChatRequest>, std::vector<bench::ChatRequest>>>>();
  for (size_t i = 0; i < w.datasets.size(); ++i) {
    auto& [warm, measured] = split->emplace_back();
    uint64_t seed = a.seed;
    auto add = [&](std::vector<bench::ChatRequest>& list, int32_t p) {
      const auto prompt = static_cast<size_t>(p);
      list.push_back(
          {.system = w.system,
           .prompt = w.datasets[i].prompts[prompt],
           .prompt_ids = prompt_ids[i].empty() ? std::vector<int32_t>() : prompt_ids[i][prompt],
           .max_tokens = a.max_tokens,
           .temperature = a.temperature,
           .seed = seed++});
    };
    for (int32_t p : w.manifests[i].warmup) add(warm, p);
    for (int32_t p : w.manifests[i].measured) add(measured, p);
  }
  const std::vector<double> arrivals = MeasuredArrivals(a);
  return bench::CellRunner(
      [=, &w](const BenchMode&, const std::string& dataset, int32_t c,
              const std::function<void()>& on_done) -> Result<bench::RunMetrics> {
        const auto& [warm, measured] = (*split)[IndexOf(w, dataset)];
        DSCALE_RETURN_IF_ERROR(
            bench::RunServerLoop(target, warm, {.concurrency = c}, on_done).status());
        DSCALE_ASSIGN_OR_RETURN(
            bench::LoopOutcome outcome,
            bench::RunServerLoop(target, measured, {.concurrency = c, .arrivals = arrivals},
                                 on_done));
        return bench::MetricsFrom(outcome.samples, outcome.window_s);
      });
}

// `models`: the in-process run's models (the predictor files they loaded), or nullptr.
// What the drafter drafted over: the subset's size, "full", or the flag when nothing was loaded.
nlohmann::json DraftVocabJson(const BenchArgs& a, const Runtime* models) {
  if (!a.url.empty()) return "server";
  if (models == nullptr || !models->main.drafter) {
    return std::string(DraftVocabChoiceName(a.models.draft_vocab));
  }
  const DraftVocab* subset = models->main.drafter->draft_vocab();
  return subset != nullptr ? nlohmann::json(subset->size()) : nlohmann::json("full");
}

// The predictor file the variant loaded, or --domino-predictor when nothing was loaded.
std::string DominoPredictorPath(const BenchArgs& a, const Runtime* models) {
  if (models == nullptr) return a.domino_predictor;
  return models->variant ? models->variant->predictor_path : "";
}

nlohmann::json ConfigJson(const BenchArgs& a, const Runtime* models) {
  const ModelOptions& o = a.models;
  return {{"target", o.target},
          {"drafter", o.drafter},
          {"predictor", models != nullptr ? models->main.predictor_path : o.predictor},
          {"domino_predictor", DominoPredictorPath(a, models)},
          {"dspark_drafter", a.dspark_drafter},
          {"dspark_predictor", models != nullptr && models->dspark ? models->dspark->predictor_path
                                                                   : a.dspark_predictor},
          {"url", a.url},
          {"server_prompts", a.url.empty() ? "" : a.server_prompts},
          {"datasets", a.datasets},
          {"warmup", a.warmup},
          {"requests", a.requests},
          {"request_rate", a.request_rate},
          {"distinct", a.distinct},
          {"max_tokens", a.max_tokens},
          {"repeats", a.repeats},
          {"temperature", a.temperature},
          {"seed", a.seed},
          {"verify_budget", a.budget.VerifyBudget()->automatic
                                ? nlohmann::json("auto")
                                : nlohmann::json(a.budget.VerifyBudget()->fraction)},
          {"tile_routing", a.tile_routing},
          {"draft_sampling",
           a.url.empty() ? std::string(DraftSamplingName(o.draft_sampling)) : "server"},
          {"device", a.url.empty() ? o.device : "server"},
          {"weights", a.url.empty() ? std::string(WeightsModeName(o.weights)) : "server"},
          {"activations",
           a.url.empty() ? std::string(cpu::Bf16ActivationsName(o.activations)) : "server"},
          {"int8_activations",
           a.url.empty() ? std::string(cpu::Int8ActivationsName(o.int8_activations)) : "server"},
          {"kv_dtype", a.url.empty() ? std::string(KvDtypeName(a.kv_dtype)) : "server"},
          {"shared_prefix_tokens", a.shared_prefix_tokens},
          {"prefix_cache", a.prefix_cache},
          {"mixed_prefill", a.url.empty() ? nlohmann::json(a.mixed_prefill) : "server"},
          {"prompt_wait_steps",
           a.url.empty() ? nlohmann::json(a.prompt_wait_steps) : nlohmann::json("server")},
          {"draft_vocab", DraftVocabJson(a, models)}};
}

Status WriteOutputs(const bench::Report& report, const std::optional<bench::Agreement>& agreement,
                    const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError(dir + ": " + ec.message());
  nlohmann::json results = bench::RenderJson(report);
  if (agreement) {
    results["agreement"] = bench::AgreementJson(*agreement);
    DSCALE_RETURN_IF_ERROR(
        bench::WriteTextFile(dir + "/agreement.txt", bench::RenderAgreement(*agreement)));
  }
  DSCALE_RETURN_IF_ERROR(bench::WriteTextFile(dir + "/results.json", results.dump(2) + "\n"));
  DSCALE_RETURN_IF_ERROR(bench::WriteTextFile(dir + "/results.csv", bench::RenderCsv(report)));
  DSCALE_RETURN_IF_ERROR(bench::WriteTextFile(dir + "/table.txt", bench::RenderTable(report)));
  DSCALE_ASSIGN_OR_RETURN(bench::PlotResult plots, bench::WritePlots(report, dir));
  if (!plots.drawn) {
    std::fprintf(stderr, "note: gnuplot is not installed; skipped the PNG plots (script: %s)\n",
                 plots.script.c_str());
  }
  return Status::Ok();
}

Status RunBench(const BenchArgs& a) {
  DSCALE_ASSIGN_OR_RETURN(std::vector<BenchMode> modes, SelectModes(a));
  if (!a.url.empty() && !a.step_trace.empty()) {
    return InvalidArgument(
        "--step-trace applies to in-process runs (a server writes its own: "
        "dscale serve --step-trace)");
  }
  if (!a.step_trace.empty()) {
    std::error_code error;
    std::filesystem::create_directories(a.step_trace, error);
    if (error) return InvalidArgument("--step-trace " + a.step_trace + ": " + error.message());
  }
  for (const auto& [flag, mode] : {std::pair{"--weights", a.models.weights},
                                   std::pair{"--drafter-weights", a.models.drafter_weights}}) {
    if (!a.url.empty() && mode != WeightsMode::kAsStored) {
      return InvalidArgument(std::string(flag) +
                             " applies to in-process runs; a server holds the weights it was "
                             "started with (dscale serve " +
                             flag + ")");
    }
    DSCALE_RETURN_IF_ERROR(CheckWeightsForDevice(a.models.device, mode, flag));
  }
  if (!a.url.empty() && a.models.draft_sampling != DraftSampling::kArgmax) {
    return InvalidArgument(
        "--draft-sampling applies to in-process runs; a server drafts as it was started "
        "(dscale serve --draft-sampling)");
  }
  if (!a.url.empty() && (a.shared_prefix_tokens > 0 || a.prefix_cache)) {
    return InvalidArgument(
        "--shared-prefix-tokens and --prefix-cache apply to in-process runs (the system turn is "
        "sized with the target's tokenizer; a server caches prefixes as it was started)");
  }
  DSCALE_ASSIGN_OR_RETURN(std::vector<int32_t> concurrency,
                          bench::ParsePositiveList(a.concurrency, "--concurrency"));
  DSCALE_ASSIGN_OR_RETURN(Workload workload, LoadWorkload(a));
  // Read before the sweep, so a bad path fails now rather than after a long run.
  std::optional<bench::PriorRun> prior;
  if (!a.compare.empty()) {
    Result<bench::PriorRun> loaded = bench::LoadPriorRun(a.compare);
    if (!loaded.ok()) return loaded.status().WithContext("--compare");
    prior = std::move(*loaded);
  }
  std::unique_ptr<Runtime> models;
  bench::CellRunner runner;
  if (a.url.empty()) {
    DSCALE_ASSIGN_OR_RETURN(models, LoadModels(a, modes, concurrency));
    if (a.shared_prefix_tokens > 0) {
      DSCALE_ASSIGN_OR_RETURN(
          workload.system, bench::SharedSystemPrompt(*models->tokenizer, a.shared_prefix_tokens));
    }
    DSCALE_ASSIGN_OR_RETURN(runner, InProcessRunner(a, modes, workload, *models));
  } else {
    DSCALE_ASSIGN_OR_RETURN(runner, ServerRunner(a, workload));
  }
  bench::SweepPlan plan{.modes = modes,
                        .concurrency = concurrency,
                        .repeats = a.repeats,
                        .requests_per_cell = a.warmup + a.requests};
  for (const bench::Dataset& d : workload.datasets) plan.datasets.push_back(d.name);
  bench::Progress progress(bench::SweepRequests(plan), stderr, !a.no_progress);
  const std::string baseline = a.baseline.empty() ? DefaultBaseline(modes) : a.baseline;
  DSCALE_ASSIGN_OR_RETURN(bench::Report report, bench::RunSweep(plan, baseline, runner, &progress));
  progress.Finish();
  report.profile = a.profile;
  report.request_rate = a.request_rate;
  report.config = ConfigJson(a, models.get());
  std::fputs(bench::RenderTable(report).c_str(), stdout);
  std::optional<bench::Agreement> agreement;
  if (prior) {
    agreement = bench::CompareRuns(report, *prior);
    std::fputs(bench::RenderAgreement(*agreement).c_str(), stdout);
  }
  if (!a.out.empty()) DSCALE_RETURN_IF_ERROR(WriteOutputs(report, agreement, a.out));
  return Status::Ok();
}

void AddOptions(CLI::App* cmd, BenchArgs* a) {
  AddModelOptions(cmd, &a->models, {.target_required = false, .drafter_head = false});
  cmd->add_option("--domino-predictor", a->domino_predictor,
                  "DVL predictor trained on the Domino head's drafts (the domino+dscale mode; "
                  "default: the drafter folder's predictor-domino.bin)");
  cmd->add_option("--dspark-drafter", a->dspark_drafter,
                  "DSpark drafter checkpoint directory (Qwen3DSparkModel) for the dspark-drafter "
                  "modes");
  cmd->add_option("--dspark-predictor", a->dspark_predictor,
                  "DVL predictor trained on the DSpark drafter's drafts (its dscale modes; "
                  "default: that folder's predictor.bin)");
  cmd->add_option("--url", a->url, "Benchmark a running server instead (http://host:port)");
  cmd->add_option("--server-model", a->server_model,
                  "\"model\" field sent to the server (default: the one model its /v1/models "
                  "lists)");
  cmd->add_option(
         "--server-prompts", a->server_prompts,
         "--url: text (chat turns to /v1/chat/completions, the server's chat template) "
         "or ids (the turns encoded here with --tokenizer or the --target folder's, sent as "
         "token ids to /v1/completions: every engine sees the same tokens)")
      ->check(CLI::IsMember({"text", "ids"}))
      ->capture_default_str();
  cmd->add_option("--data-dir", a->data_dir, "Dataset folder")->capture_default_str();
  cmd->add_option("--datasets", a->datasets, "gsm8k, math500, humaneval, mbpp (list)")
      ->capture_default_str();
  cmd->add_option("--concurrency", a->concurrency,
                  "Client workers c (list): requests in flight (closed loop), or at most in "
                  "flight (--request-rate)")
      ->capture_default_str();
  cmd->add_option("--modes", a->modes,
                  "none, dflash, fixed:K, dscale, dscale:auto or dscale:F, dspark, domino, "
                  "domino+dscale, dspark-drafter, dspark-drafter+POLICY (list)")
      ->capture_default_str();
  cmd->add_flag("--ablation", a->ablation,
                "Preset: DFlash control, +tile routing, +DVL, +fixed-address workspaces/graphs");
  cmd->add_option("--widths", a->widths, "Preset: uniform truncation fixed:K for each K (list)");
  cmd->add_option("--baseline", a->baseline, "Mode the ratios divide by (default dflash or first)");
  cmd->add_option("--tile-routing", a->tile_routing, "auto (off for dflash only), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  AddKvDtypeOption(cmd, &a->kv_dtype);
}

void AddProtocolOptions(CLI::App* cmd, BenchArgs* a) {
  cmd->add_option("--warmup", a->warmup, "Warm-up requests per cell")
      ->check(AtLeast(0))
      ->capture_default_str();
  cmd->add_option("--requests", a->requests, "Measured requests per cell")
      ->check(AtLeast(1))
      ->capture_default_str();
  cmd->add_option("--distinct", a->distinct, "Distinct prompts per dataset at most")
      ->check(AtLeast(1))
      ->capture_default_str();
  cmd->add_option("--max-tokens", a->max_tokens, "Output cap")
      ->check(AtLeast(1))
      ->capture_default_str();
  cmd->add_option("--repeats", a->repeats, "Repetitions per cell (median and spread reported)")
      ->check(AtLeast(1))
      ->capture_default_str();
  cmd->add_option("--request-rate", a->request_rate,
                  "Open loop: measured requests arrive at this many a second (Poisson, the same "
                  "times for every mode and c, from --seed), at most c in flight, latency counted "
                  "from arrival; the ratios then compare mean latency (0: closed loop, each "
                  "worker sends its next request when the last one ends)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--temperature", a->temperature, "0: greedy")->capture_default_str();
  cmd->add_option("--seed", a->seed, "Manifest order and sampling seeds")->capture_default_str();
  AddBudgetOptions(cmd, &a->budget);
  cmd->add_flag("--profile", a->profile, "Add the step-time breakdown table");
  cmd->add_option("--step-trace", a->step_trace,
                  "In-process runs: a step trace per cell run in this folder, "
                  "<dataset>-c<c>-<mode>-<run>.jsonl (docs/VERIFY_BUDGET.md, \"Step trace\")");
  cmd->add_option("--shared-prefix-tokens", a->shared_prefix_tokens,
                  "Shared-prefix workload: a system turn of about N tokens before every prompt "
                  "(0: none)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("--prefix-cache", a->prefix_cache,
                "In-process engines reuse the KV pages of prompts that start alike");
  AddMixedPrefillFlag(cmd, &a->mixed_prefill);
  AddPromptWaitOption(cmd, &a->prompt_wait_steps);
  cmd->add_flag("--no-progress", a->no_progress, "No progress bar");
  cmd->add_option("--out", a->out, "Folder for results.json, results.csv, table.txt, plots");
  cmd->add_option("--compare", a->compare,
                  "An earlier run's results.json: report per cell whether the runs agree within "
                  "the reported spread");
}

}  // namespace

void RegisterBenchCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Serving benchmark over modes");
  AddOptions(cmd, args.get());
  AddProtocolOptions(cmd, args.get());
  cmd->callback([args, cmd, exit_code] {
    args->modes_given = cmd->count("--modes") > 0;
    const Status s = RunBench(*args);
    *exit_code = s.ok() ? 0 : ReportError("bench", s);
  });
}

}  // namespace dscale::cli
