// dscale calibrate-confidence: sequential temperature scaling of a DSpark drafter's confidence
// head (train/sts_calibration.h) on confidence traces written by `dscale collect
// --confidence-out` (docs/TRACE_FORMAT.md). Fits on the records of most prompts, reports the
// ECE of cumulative survival on the held-out prompts' records before and after, and writes the
// temperatures (budget/confidence_survival.h) where `--spec dspark` reads them.

#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "budget/confidence_survival.h"
#include "cli_util.h"
#include "commands.h"
#include "train/confidence_traces.h"
#include "train/sts_calibration.h"

namespace dscale::cli {
namespace {

struct CalibrateOptions {
  std::vector<std::string> traces;
  std::string out;
  uint32_t holdout_every = 5;
  int bins = train::kDefaultEceBins;
};

// The report: per position the held-out ECE before and after, the temperatures, the means.
nlohmann::ordered_json Report(const train::ConfidenceTraces& traces,
                              const train::TraceSplit& split,
                              const budget::ConfidenceCalibration& fitted,
                              const std::vector<double>& before, const std::vector<double>& after) {
  nlohmann::ordered_json positions = nlohmann::ordered_json::array();
  for (size_t k = 0; k < before.size(); ++k) {
    positions.push_back(
        {{"position", k + 1}, {"temperature", fitted.temperatures[k]},
         {"ece_before", before[k]}, {"ece_after", after[k]}});
  }
  return {{"records", traces.size()},
          {"fit_records", split.fit.size()},
          {"held_out_records", split.held_out.size()},
          {"ece_before", train::MeanEce(before)},
          {"ece_after", train::MeanEce(after)},
          {"positions", positions}};
}

int RunCalibrate(const CalibrateOptions& o) {
  auto fail = [](const Status& s) { return ReportError("calibrate-confidence", s); };
  Result<train::ConfidenceTraces> traces = train::ReadConfidenceTraces(o.traces);
  if (!traces.ok()) return fail(traces.status());
  const train::TraceSplit split = train::SplitByPrompt(*traces, o.holdout_every);
  if (split.held_out.empty() || split.fit.empty()) {
    return fail(InvalidArgument(
        "--holdout-every " + std::to_string(o.holdout_every) + ": the traces' " +
        std::to_string(traces->size()) +
        " records need prompts on both sides of the split (more prompts, or another value)"));
  }
  Result<budget::ConfidenceCalibration> fitted =
      train::FitSequentialTemperatures(*traces, split.fit, o.bins);
  if (!fitted.ok()) return fail(fitted.status());
  const std::vector<double> before =
      train::CumulativeSurvivalEce(*traces, split.held_out, {}, o.bins);
  const std::vector<double> after =
      train::CumulativeSurvivalEce(*traces, split.held_out, *fitted, o.bins);
  fitted->ece_before = train::MeanEce(before);
  fitted->ece_after = train::MeanEce(after);
  if (Status s = budget::SaveConfidenceCalibration(*fitted, o.out); !s.ok()) {
    return fail(s.WithContext("--out"));
  }
  std::cout << Report(*traces, split, *fitted, before, after).dump(2) << "\n";
  return 0;
}

}  // namespace

void RegisterCalibrateConfidenceCommand(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<CalibrateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate-confidence",
      "Fit a DSpark drafter's confidence calibration (sequential temperature scaling) on traces");
  cmd->add_option("--traces", opts->traces, "Confidence trace files (collect --confidence-out)")
      ->required();
  cmd->add_option("--out", opts->out,
                  "Calibration file to write (the drafter folder's confidence_calibration.json "
                  "is read by default)")
      ->required();
  cmd->add_option("--holdout-every", opts->holdout_every,
                  "Hold out prompt ids p with p % N == N − 1 for the ECE report")
      ->check(CLI::Range(2u, 1000u))
      ->capture_default_str();
  cmd->add_option("--bins", opts->bins, "Equal-width bins of the ECE")
      ->check(CLI::Range(2, 1000))
      ->capture_default_str();
  cmd->callback([opts, exit_code] { *exit_code = RunCalibrate(*opts); });
}

}  // namespace dscale::cli
