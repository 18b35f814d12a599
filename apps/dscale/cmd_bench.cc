// dscale bench: the serving benchmark. Closed-loop clients over fixed request manifests, for
// every (mode, dataset, concurrency) cell, on an in-process engine or a running server (--url);
// a table on the terminal, and JSON, CSV and PNG plots with --out.

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
#include "model/dflash_drafter.h"
#include "predictor_loading.h"
#include "prompt_input.h"
#include "spec/length_policy.h"

namespace dscale::cli {
namespace {

using bench::BenchMode;

struct BenchArgs {
  std::string target, drafter, predictor, tokenizer;
  std::string domino_predictor;  // the domino+dscale mode's predictor
  std::string url, server_model = "dscale";
  std::string data_dir = "data";
  std::string datasets = "gsm8k,math500,humaneval,mbpp";
  std::string concurrency = "8,16,32";
  std::string modes = "none,dflash,fixed:8,dscale";
  std::string widths;
  bool ablation = false;
  std::string baseline;
  std::string tile_routing = "auto";
  std::string device{kDefaultDevice};
  WeightsMode weights = WeightsMode::kAsStored;
  cpu::Bf16Activations activations = kDefaultActivations;
  cpu::Int8Activations int8_activations = kDefaultInt8Activations;
  DraftVocabChoice draft_vocab = kDefaultDraftVocab;
  KvDtype kv_dtype = KvDtype::kBf16;
  int32_t warmup = 32, requests = 512, distinct = 256, max_tokens = 2048, repeats = 1;
  float temperature = 0.0f;
  uint64_t seed = 0;
  BudgetFlags budget;
  bool profile = false, no_progress = false;
  int32_t shared_prefix_tokens = 0;  // a system turn of about this many tokens before every prompt
  bool prefix_cache = false;
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

// The loaded in-process models; drafter and predictor only when a mode needs them.
struct Models {
  std::optional<DecoderModel> target;
  std::optional<DFlashDrafter> drafter;
  std::optional<dvl::Predictor> predictor;
  std::optional<DFlashDrafter> domino_drafter;        // the same drafter with its Domino head
  std::optional<dvl::Predictor> domino_predictor;     // for domino+dscale
  std::string predictor_path, domino_predictor_path;  // the files loaded (flags or defaults)
  std::optional<Tokenizer> tokenizer;
  std::unique_ptr<StepBackend> backend;         // target and drafter where --device puts them
  std::unique_ptr<StepBackend> domino_backend;  // target and domino_drafter on the CPU
  std::optional<budget::SpsTable> sps_table;    // dspark's, profiled once for every cell
};

Result<std::unique_ptr<Models>> LoadModels(const BenchArgs& a, const std::vector<BenchMode>& modes,
                                           const std::vector<int32_t>& concurrency) {
  bool need_drafter = false, need_predictor = false, need_domino = false;
  bool need_domino_predictor = false;
  for (const BenchMode& m : modes) {
    const bool predicts = m.runnable && (m.policy == "dscale" || m.policy == "dspark");
    need_drafter |= m.runnable && m.policy != "none" && !m.domino_head;
    need_predictor |= predicts && !m.domino_head;
    need_domino |= m.runnable && m.domino_head;
    need_domino_predictor |= predicts && m.domino_head;
  }
  if (need_domino && a.drafter.empty()) return InvalidArgument("the domino modes need --drafter");
  if (need_domino && a.device != "cpu") {
    return InvalidArgument("the domino modes run on the CPU only (--device cpu)");
  }
  if (a.target.empty()) return InvalidArgument("--target is required without --url");
  if (need_drafter && a.drafter.empty()) return InvalidArgument("the modes need --drafter");
  auto m = std::make_unique<Models>();
  if (need_predictor) {
    DSCALE_ASSIGN_OR_RETURN(m->predictor_path, ResolvePredictorPath(a.predictor, "--predictor",
                                                                    a.drafter, DrafterHead::kNone));
  }
  if (need_domino_predictor) {
    DSCALE_ASSIGN_OR_RETURN(m->domino_predictor_path,
                            ResolvePredictorPath(a.domino_predictor, "--domino-predictor",
                                                 a.drafter, DrafterHead::kDomino));
  }
  DSCALE_ASSIGN_OR_RETURN(
      m->target,
      DecoderModel::Load(a.target, a.weights, {.bf16 = a.activations, .int8 = a.int8_activations}));
  DSCALE_ASSIGN_OR_RETURN(
      std::optional<Tokenizer> tok,
      LoadOptionalTokenizer(a.tokenizer, a.target, m->target->config().vocab_size));
  if (!tok) return InvalidArgument("no tokenizer: pass --tokenizer (the target folder has none)");
  m->tokenizer = std::move(tok);
  if (need_drafter) {
    DSCALE_ASSIGN_OR_RETURN(
        m->drafter, DFlashDrafter::Load(a.drafter, *m->target, DrafterHead::kNone, a.draft_vocab));
  }
  if (need_predictor) {
    DSCALE_ASSIGN_OR_RETURN(m->predictor, LoadPredictorFor(m->predictor_path, *m->drafter));
  }
  if (need_domino) {
    DSCALE_ASSIGN_OR_RETURN(
        m->domino_drafter,
        DFlashDrafter::Load(a.drafter, *m->target, DrafterHead::kDomino, a.draft_vocab));
  }
  if (need_domino_predictor) {
    Result<dvl::Predictor> loaded = LoadPredictorFor(m->domino_predictor_path, *m->domino_drafter);
    if (!loaded.ok()) return loaded.status().WithContext("--domino-predictor");
    m->domino_predictor = std::move(*loaded);
  }
  DSCALE_ASSIGN_OR_RETURN(m->backend,
                          MakeBackend(a.device, *m->target, m->drafter ? &*m->drafter : nullptr));
  if (m->domino_drafter) {
    DSCALE_ASSIGN_OR_RETURN(m->domino_backend, MakeBackend("cpu", *m->target, &*m->domino_drafter));
  }
  // dspark's table covers the largest cell: W · the largest concurrency.
  bool need_sps = false;
  for (const BenchMode& mode : modes) need_sps |= mode.runnable && mode.policy == "dspark";
  int32_t most = 1;
  for (int32_t c : concurrency) most = std::max(most, c);
  DSCALE_ASSIGN_OR_RETURN(
      m->sps_table, SpsTableFor(a.budget, need_sps, m->backend->target(), m->backend->drafter(),
                                int64_t{m->drafter ? m->drafter->block_size() : 1} * most));
  return m;
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

Result<bench::CellRunner> InProcessRunner(const BenchArgs& a, const Workload& w, Models& m) {
  auto cells = std::make_shared<std::vector<bench::CellRequests>>();
  for (size_t i = 0; i < w.datasets.size(); ++i) {
    DSCALE_ASSIGN_OR_RETURN(
        auto ids, bench::EncodeChatPrompts(*m.tokenizer, w.datasets[i].prompts, w.system));
    cells->push_back(bench::ManifestRequests(w.manifests[i], ids, a.seed));
  }
  const bench::InProcessModels models{
      .backend = m.backend.get(),
      .predictor = m.predictor ? &*m.predictor : nullptr,
      .domino_backend = m.domino_backend.get(),
      .domino_predictor = m.domino_predictor ? &*m.domino_predictor : nullptr,
      .verify_budget = a.budget.VerifyBudget().value(),
      .sps_table = m.sps_table ? &*m.sps_table : nullptr,
      .kv_dtype = a.kv_dtype,
      .prefix_cache = a.prefix_cache};
  const GenerationParams params{.max_tokens = a.max_tokens,
                                .sampling = {.temperature = a.temperature},
                                .stop_ids = m.target->config().eos_token_ids};
  return bench::CellRunner([=, &w](const BenchMode& mode, const std::string& dataset, int32_t c,
                                   const std::function<void()>& on_done) {
    return bench::RunInProcessCell(models, mode, (*cells)[IndexOf(w, dataset)], c, params, on_done);
  });
}

bench::CellRunner ServerRunner(const BenchArgs& a, const Workload& w) {
  const bench::ServerTarget target{.url = a.url, .model = a.server_model};
  auto split = std::make_shared<
      std::vector<std::pair<std::vector<bench::ChatRequest>, std::vector<bench::ChatRequest>>>>();
  for (size_t i = 0; i < w.datasets.size(); ++i) {
    auto& [warm, measured] = split->emplace_back();
    uint64_t seed = a.seed;
    auto add = [&](std::vector<bench::ChatRequest>& list, int32_t p) {
      list.push_back({.system = w.system,
                      .prompt = w.datasets[i].prompts[static_cast<size_t>(p)],
                      .max_tokens = a.max_tokens,
                      .temperature = a.temperature,
                      .seed = seed++});
    };
    for (int32_t p : w.manifests[i].warmup) add(warm, p);
    for (int32_t p : w.manifests[i].measured) add(measured, p);
  }
  return [=, &w](const BenchMode&, const std::string& dataset, int32_t c,
                 const std::function<void()>& on_done) -> Result<bench::RunMetrics> {
    const auto& [warm, measured] = (*split)[IndexOf(w, dataset)];
    DSCALE_RETURN_IF_ERROR(bench::RunServerClosedLoop(target, warm, c, on_done).status());
    DSCALE_ASSIGN_OR_RETURN(bench::LoopOutcome outcome,
                            bench::RunServerClosedLoop(target, measured, c, on_done));
    return bench::MetricsFrom(outcome.samples, outcome.window_s);
  };
}

// `models`: the in-process run's models (the predictor files they loaded), or nullptr.
// What the drafter drafted over: the subset's size, "full", or the flag when nothing was loaded.
nlohmann::json DraftVocabJson(const BenchArgs& a, const Models* models) {
  if (!a.url.empty()) return "server";
  if (models == nullptr || !models->drafter)
    return std::string(DraftVocabChoiceName(a.draft_vocab));
  const DraftVocab* subset = models->drafter->draft_vocab();
  return subset != nullptr ? nlohmann::json(subset->size()) : nlohmann::json("full");
}

nlohmann::json ConfigJson(const BenchArgs& a, const Models* models) {
  const bool loaded = models != nullptr;
  return {{"target", a.target},
          {"drafter", a.drafter},
          {"predictor", loaded ? models->predictor_path : a.predictor},
          {"domino_predictor", loaded ? models->domino_predictor_path : a.domino_predictor},
          {"url", a.url},
          {"datasets", a.datasets},
          {"warmup", a.warmup},
          {"requests", a.requests},
          {"distinct", a.distinct},
          {"max_tokens", a.max_tokens},
          {"repeats", a.repeats},
          {"temperature", a.temperature},
          {"seed", a.seed},
          {"verify_budget", a.budget.VerifyBudget()->automatic
                                ? nlohmann::json("auto")
                                : nlohmann::json(a.budget.VerifyBudget()->fraction)},
          {"tile_routing", a.tile_routing},
          {"device", a.url.empty() ? a.device : "server"},
          {"weights", a.url.empty() ? std::string(WeightsModeName(a.weights)) : "server"},
          {"activations",
           a.url.empty() ? std::string(cpu::Bf16ActivationsName(a.activations)) : "server"},
          {"int8_activations",
           a.url.empty() ? std::string(cpu::Int8ActivationsName(a.int8_activations)) : "server"},
          {"kv_dtype", a.url.empty() ? std::string(KvDtypeName(a.kv_dtype)) : "server"},
          {"shared_prefix_tokens", a.shared_prefix_tokens},
          {"prefix_cache", a.prefix_cache},
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
  if (!a.url.empty() && a.weights != WeightsMode::kAsStored) {
    return InvalidArgument(
        "--weights applies to in-process runs; a server holds the weights it was started with "
        "(dscale serve --weights)");
  }
  DSCALE_RETURN_IF_ERROR(CheckWeightsForDevice(a.device, a.weights));
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
  std::unique_ptr<Models> models;
  bench::CellRunner runner;
  if (a.url.empty()) {
    DSCALE_ASSIGN_OR_RETURN(models, LoadModels(a, modes, concurrency));
    if (a.shared_prefix_tokens > 0) {
      DSCALE_ASSIGN_OR_RETURN(
          workload.system, bench::SharedSystemPrompt(*models->tokenizer, a.shared_prefix_tokens));
    }
    DSCALE_ASSIGN_OR_RETURN(runner, InProcessRunner(a, workload, *models));
  } else {
    runner = ServerRunner(a, workload);
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
  cmd->add_option("--target", a->target, "Target checkpoint directory (in-process runs)");
  cmd->add_option("--drafter", a->drafter, "DFlash drafter checkpoint directory");
  cmd->add_option("--predictor", a->predictor,
                  "DVL predictor file (the dscale and dspark modes; default: the drafter "
                  "folder's predictor.bin)");
  cmd->add_option("--domino-predictor", a->domino_predictor,
                  "DVL predictor trained on the Domino head's drafts (the domino+dscale mode; "
                  "default: the drafter folder's predictor-domino.bin)");
  cmd->add_option("--tokenizer", a->tokenizer, "Tokenizer folder (default: the target's)");
  cmd->add_option("--url", a->url, "Benchmark a running server instead (http://host:port)");
  cmd->add_option("--server-model", a->server_model, "\"model\" field sent to the server")
      ->capture_default_str();
  cmd->add_option("--data-dir", a->data_dir, "Dataset folder")->capture_default_str();
  cmd->add_option("--datasets", a->datasets, "gsm8k, math500, humaneval, mbpp (list)")
      ->capture_default_str();
  cmd->add_option("--concurrency", a->concurrency, "Closed-loop workers c (list)")
      ->capture_default_str();
  cmd->add_option("--modes", a->modes,
                  "none, dflash, fixed:K, dscale, dscale:auto or dscale:F, dspark, domino, "
                  "domino+dscale (list)")
      ->capture_default_str();
  cmd->add_flag("--ablation", a->ablation,
                "Preset: DFlash control, +tile routing, +DVL, +fixed-address workspaces/graphs");
  cmd->add_option("--widths", a->widths, "Preset: uniform truncation fixed:K for each K (list)");
  cmd->add_option("--baseline", a->baseline, "Mode the ratios divide by (default dflash or first)");
  cmd->add_option("--tile-routing", a->tile_routing, "auto (off for dflash only), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  AddDeviceOption(cmd, &a->device);
  AddWeightsOption(cmd, &a->weights);
  AddActivationsOption(cmd, &a->activations);
  AddInt8ActivationsOption(cmd, &a->int8_activations);
  AddDraftVocabOption(cmd, &a->draft_vocab);
  AddThreadsOption(cmd);
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
  cmd->add_option("--temperature", a->temperature, "0: greedy")->capture_default_str();
  cmd->add_option("--seed", a->seed, "Manifest order and sampling seeds")->capture_default_str();
  AddBudgetOptions(cmd, &a->budget);
  cmd->add_flag("--profile", a->profile, "Add the step-time breakdown table");
  cmd->add_option("--shared-prefix-tokens", a->shared_prefix_tokens,
                  "Shared-prefix workload: a system turn of about N tokens before every prompt "
                  "(0: none)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("--prefix-cache", a->prefix_cache,
                "In-process engines reuse the KV pages of prompts that start alike");
  cmd->add_flag("--no-progress", a->no_progress, "No progress bar");
  cmd->add_option("--out", a->out, "Folder for results.json, results.csv, table.txt, plots");
  cmd->add_option("--compare", a->compare,
                  "An earlier run's results.json: report per cell whether the runs agree within "
                  "the reported spread");
}

}  // namespace

void RegisterBenchCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Closed-loop serving benchmark over modes");
  AddOptions(cmd, args.get());
  AddProtocolOptions(cmd, args.get());
  cmd->callback([args, cmd, exit_code] {
    args->modes_given = cmd->count("--modes") > 0;
    const Status s = RunBench(*args);
    *exit_code = s.ok() ? 0 : ReportError("bench", s);
  });
}

}  // namespace dscale::cli
