// dscale train-predictor / eval-predictor: fit the DVL acceptance predictor on traces written
// by `dscale collect` (docs/TRACE_FORMAT.md) and measure it (R², retention, mean window).

#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "core/status.h"
#include "dvl/features.h"
#include "dvl/predictor.h"
#include "train/predictor_eval.h"
#include "train/predictor_trainer.h"
#include "train/trace_file.h"

namespace dscale::cli {
namespace {

struct TrainOptions {
  std::vector<std::string> traces;
  std::string out;
  train::TrainerConfig config;
};

struct EvalOptions {
  std::vector<std::string> traces;
  std::string predictor;
  std::string split = "all";
  uint64_t seed = train::TrainerConfig{}.seed;
  double holdout = train::TrainerConfig{}.holdout_fraction;
  double verify_budget = dvl::kDefaultVerifyBudget;
};

nlohmann::ordered_json ReportJson(const train::EvalReport& r) {
  return {{"records", r.records},
          {"cohorts", r.cohorts},
          {"r2", r.r2},
          {"retention_raw", r.retention_raw},
          {"retention_adjusted", r.retention_adjusted},
          {"mean_window_raw", r.mean_window_raw},
          {"mean_window_adjusted", r.mean_window_adjusted},
          {"mean_accepted", r.mean_accepted},
          {"mean_predicted", r.mean_predicted}};
}

void PrintEpoch(const train::EpochReport& e) {
  std::printf("epoch %3d  train loss %.5f  holdout loss %.5f  holdout R2 %.4f%s\n", e.epoch,
              e.train_loss, e.holdout_loss, e.holdout_r2, e.improved ? "  *" : "");
  std::fflush(stdout);
}

Status RunTrain(const TrainOptions& opts) {
  DSCALE_ASSIGN_OR_RETURN(const train::TraceSet traces, train::ReadTraceFiles(opts.traces));
  std::printf("%zu records from %zu file(s); drafter hidden %u, vocab %u, projection seed %llu\n",
              traces.size(), opts.traces.size(), traces.header.drafter_hidden,
              traces.header.drafter_vocab,
              static_cast<unsigned long long>(traces.header.projection_seed));
  DSCALE_ASSIGN_OR_RETURN(const train::TrainResult result,
                          train::TrainPredictor(traces, opts.config, PrintEpoch));
  std::printf("split: %zu train records (%lld prompts), %zu holdout records (%lld prompts)\n",
              result.split.train.size(), static_cast<long long>(result.split.train_prompts),
              result.split.holdout.size(), static_cast<long long>(result.split.holdout_prompts));
  std::printf("best epoch %d of %d: holdout loss %.5f, holdout R2 %.4f\n", result.best_epoch,
              result.epochs_run, result.holdout_loss, result.holdout_r2);
  dvl::Predictor predictor(
      dvl::MakeProjections(traces.header.drafter_hidden, traces.header.drafter_vocab,
                           traces.header.projection_seed),
      result.weights);
  DSCALE_ASSIGN_OR_RETURN(const train::EvalReport report,
                          train::EvaluatePredictor(predictor, traces, result.split.holdout));
  std::printf("holdout: %s\n", ReportJson(report).dump().c_str());
  DSCALE_RETURN_IF_ERROR(predictor.Save(opts.out));
  std::printf("wrote %s\n", opts.out.c_str());
  return Status::Ok();
}

Result<nlohmann::ordered_json> RunEval(const EvalOptions& opts) {
  DSCALE_ASSIGN_OR_RETURN(const train::TraceSet traces, train::ReadTraceFiles(opts.traces));
  const dvl::DrafterDims dims{.hidden_size = traces.header.drafter_hidden,
                              .vocab_size = traces.header.drafter_vocab};
  DSCALE_ASSIGN_OR_RETURN(const dvl::Predictor predictor,
                          dvl::Predictor::Load(opts.predictor, dims));
  std::vector<size_t> rows;
  if (opts.split != "all") {
    DSCALE_ASSIGN_OR_RETURN(const train::Split split,
                            train::SplitByPrompt(traces.meta, opts.seed, opts.holdout));
    rows = opts.split == "holdout" ? split.holdout : split.train;
  }
  DSCALE_ASSIGN_OR_RETURN(const train::EvalReport report,
                          train::EvaluatePredictor(predictor, traces, rows, opts.verify_budget));
  return ReportJson(report);
}

}  // namespace

void RegisterTrainPredictorCommand(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<TrainOptions>();
  train::TrainerConfig& c = opts->config;
  CLI::App* cmd = app.add_subcommand("train-predictor", "Train the DVL acceptance predictor");
  cmd->add_option("--traces", opts->traces, "trace files from dscale collect")->required();
  cmd->add_option("--out", opts->out, "predictor file to write")->required();
  cmd->add_option("--epochs", c.max_epochs, "maximum epochs")->capture_default_str();
  cmd->add_option("--lr", c.learning_rate, "Adam learning rate")->capture_default_str();
  cmd->add_option("--batch-size", c.batch_size, "minibatch size")->capture_default_str();
  cmd->add_option("--seed", c.seed, "seed of the split, initialisation and shuffles")
      ->capture_default_str();
  cmd->add_option("--holdout", c.holdout_fraction, "fraction of prompt ids held out")
      ->capture_default_str();
  cmd->add_option("--patience", c.patience, "epochs without holdout improvement before stopping")
      ->capture_default_str();
  cmd->add_option("--mse-weight", c.mse_weight, "weight of the accepted-count MSE term")
      ->capture_default_str();
  cmd->callback([opts, exit_code] {
    const Status status = RunTrain(*opts);
    if (!status.ok()) std::cerr << "dscale train-predictor: " << status.message() << "\n";
    *exit_code = status.ok() ? 0 : 1;
  });
}

void RegisterEvalPredictorCommand(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<EvalOptions>();
  CLI::App* cmd = app.add_subcommand("eval-predictor",
                                     "Evaluate a DVL predictor on traces: R2, retention, windows");
  cmd->add_option("--predictor", opts->predictor, "predictor file")->required();
  cmd->add_option("--traces", opts->traces, "trace files from dscale collect")->required();
  cmd->add_option("--split", opts->split, "records to evaluate: all, holdout or train")
      ->check(CLI::IsMember({"all", "holdout", "train"}))
      ->capture_default_str();
  cmd->add_option("--seed", opts->seed, "split seed (as given to train-predictor)")
      ->capture_default_str();
  cmd->add_option("--holdout", opts->holdout, "holdout fraction (as given to train-predictor)")
      ->capture_default_str();
  cmd->add_option("--verify-budget", opts->verify_budget, "budget fraction of W*N per cohort")
      ->capture_default_str();
  cmd->callback([opts, exit_code] {
    Result<nlohmann::ordered_json> out = RunEval(*opts);
    if (!out.ok()) {
      std::cerr << "dscale eval-predictor: " << out.status().message() << "\n";
      *exit_code = 1;
      return;
    }
    std::cout << out->dump(2) << "\n";
    *exit_code = 0;
  });
}

}  // namespace dscale::cli
