#pragma once
// Repeat agreement: a run compared cell by cell with an earlier run of the same configuration
// (its results.json). Two runs agree on a cell when their median throughputs (in an open loop,
// --request-rate, whose arrivals set the throughput: their median mean latencies) differ by no
// more than the larger of the two spreads the harness reported for that cell:
//   |now − before| / before ≤ max(spread_now, spread_before),  spread = (max − min) / median.
// With one repeat per cell the spread is 0 and only identical medians agree, so agreement is
// meaningful from --repeats 2 up (3 or more is better).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/report.h"
#include "core/status.h"

namespace dscale::bench {

// One cell of an earlier run, as its results.json recorded it.
struct PriorCell {
  std::string mode;
  std::string dataset;
  int32_t concurrency = 0;
  double throughput = 0;  // median over its repeats
  double spread = 0;
  // Median over its repeats of their mean latency, and its spread; NaN where the file has none.
  double latency_mean = 0, latency_spread = 0;
};

// The measured cells of a results.json document. Errors name the offending field.
Result<std::vector<PriorCell>> ParsePriorCells(const nlohmann::json& results);

// An earlier run read from its results.json: its cells and its "config" object.
struct PriorRun {
  std::vector<PriorCell> cells;
  nlohmann::json config = nlohmann::json::object();
};
// Errors name the file and what is wrong with it.
Result<PriorRun> LoadPriorRun(const std::string& results_json_path);

struct CellAgreement {
  std::string mode;
  std::string dataset;
  int32_t concurrency = 0;
  double before = 0, now = 0;                // median throughputs, or mean latencies (open)
  double spread_before = 0, spread_now = 0;  // relative spreads
  double difference = 0;                     // |now − before| / before
  bool agree = false;
};

struct Agreement {
  bool latency = false;              // an open loop: the cells compare mean latency
  std::vector<CellAgreement> cells;  // cells measured in both runs, in the current run's order
  std::vector<std::string> settings_differ;  // config keys whose values differ between the runs
  int64_t agreeing() const;
};

// Compares the cells measured in both runs, and the runs' settings (now.config vs before.config).
Agreement CompareRuns(const Report& now, const PriorRun& before);

std::string RenderAgreement(const Agreement& agreement);
nlohmann::json AgreementJson(const Agreement& agreement);

}  // namespace dscale::bench
