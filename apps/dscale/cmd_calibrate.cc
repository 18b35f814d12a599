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
  std::vector<std::string> held_out;  // report on these instead of a split of `traces`
  std::string out;
  uint32_t holdout_every = 5;
  int bins = train::kDefaultEceBins;
};

// The records fitted on and the held-out ones the report measures: another set of files
// (--held-out), or the prompts of `traces` that SplitByPrompt holds out.
struct CalibrationSets {
  train::ConfidenceTraces fit, held_out;
  std::vector<size_t> fit_rows, held_out_rows;  // indices into fit / held_out
};

Result<CalibrationSets> SetsFor(const CalibrateOptions& o) {
  CalibrationSets sets;
  DSCALE_ASSIGN_OR_RETURN(sets.fit, train::ReadConfidenceTraces(o.traces));
  if (!o.held_out.empty()) {
    DSCALE_ASSIGN_OR_RETURN(sets.held_out, train::ReadConfidenceTraces(o.held_out));
    if (sets.held_out.positions != sets.fit.positions) {
      return InvalidArgument("--held-out: " + std::to_string(sets.held_out.positions) +
                             " positions per record, --traces have " +
                             std::to_string(sets.fit.positions));
    }
    for (size_t r = 0; r < sets.fit.size(); ++r) sets.fit_rows.push_back(r);
    for (size_t r = 0; r < sets.held_out.size(); ++r) sets.held_out_rows.push_back(r);
  } else {
    train::TraceSplit split = train::SplitByPrompt(sets.fit, o.holdout_every);
    sets.held_out = sets.fit;
    sets.fit_rows = std::move(split.fit);
    sets.held_out_rows = std::move(split.held_out);
  }
  if (sets.held_out_rows.empty() || sets.fit_rows.empty()) {
    return InvalidArgument(
        "--holdout-every " + std::to_string(o.holdout_every) + ": the traces' " +
        std::to_string(sets.fit.size()) +
        " records need prompts on both sides of the split (more prompts, another value, or "
        "--held-out FILE)");
  }
  return sets;
}

// The report: per position the held-out ECE before and after, the temperatures, the means.
nlohmann::ordered_json Report(const CalibrationSets& sets,
                              const budget::ConfidenceCalibration& fitted,
                              const std::vector<double>& before, const std::vector<double>& after) {
  nlohmann::ordered_json positions = nlohmann::ordered_json::array();
  for (size_t k = 0; k < before.size(); ++k) {
    positions.push_back(
        {{"position", k + 1}, {"temperature", fitted.temperatures[k]},
         {"ece_before", before[k]}, {"ece_after", after[k]}});
  }
  return {{"fit_records", sets.fit_rows.size()},
          {"held_out_records", sets.held_out_rows.size()},
          {"ece_before", train::MeanEce(before)},
          {"ece_after", train::MeanEce(after)},
          {"positions", positions}};
}

int RunCalibrate(const CalibrateOptions& o) {
  auto fail = [](const Status& s) { return ReportError("calibrate-confidence", s); };
  Result<CalibrationSets> sets = SetsFor(o);
  if (!sets.ok()) return fail(sets.status());
  Result<budget::ConfidenceCalibration> fitted =
      train::FitSequentialTemperatures(sets->fit, sets->fit_rows, o.bins);
  if (!fitted.ok()) return fail(fitted.status());
  const std::vector<double> before =
      train::CumulativeSurvivalEce(sets->held_out, sets->held_out_rows, {}, o.bins);
  const std::vector<double> after =
      train::CumulativeSurvivalEce(sets->held_out, sets->held_out_rows, *fitted, o.bins);
  fitted->ece_before = train::MeanEce(before);
  fitted->ece_after = train::MeanEce(after);
  if (Status s = budget::SaveConfidenceCalibration(*fitted, o.out); !s.ok()) {
    return fail(s.WithContext("--out"));
  }
  std::cout << Report(*sets, *fitted, before, after).dump(2) << "\n";
  return 0;
}

}  // namespace

void RegisterCalibrateConfidenceCommand(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<CalibrateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate-confidence",
      "Fit a DSpark drafter's confidence calibration (sequential temperature scaling) on traces");
  cmd->add_option("--traces", opts->traces, "Confidence trace files to fit on (collect --confidence-out)")
      ->required();
  cmd->add_option("--out", opts->out,
                  "Calibration file to write (the drafter folder's confidence_calibration.json "
                  "is read by default)")
      ->required();
  cmd->add_option("--held-out", opts->held_out,
                  "Confidence trace files the ECE report measures (default: a split of --traces)");
  cmd->add_option("--holdout-every", opts->holdout_every,
                  "Without --held-out: hold out prompt ids p with p % N == N − 1 for the report")
      ->check(CLI::Range(2u, 1000u))
      ->capture_default_str();
  cmd->add_option("--bins", opts->bins, "Equal-width bins of the ECE")
      ->check(CLI::Range(2, 1000))
      ->capture_default_str();
  cmd->callback([opts, exit_code] { *exit_code = RunCalibrate(*opts); });
}

}  // namespace dscale::cli
