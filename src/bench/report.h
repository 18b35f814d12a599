#pragma once
// Benchmark results: per-run metrics, cells (mode × dataset × concurrency, over repeats),
// ratios against a baseline mode with their geometric means (the paper's aggregation), and the
// renderings: a terminal table, CSV and JSON.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bench/stats.h"

namespace dscale::bench {

// One finished request of the measured window.
struct RequestSample {
  double latency_s = 0;  // finished − submitted (in an open loop, − arrived)
  double ttft_s = 0;     // first token − submitted (or arrived)
  int64_t output_tokens = 0;
};

// Time spent in each stage of the engine's step pipeline over a measured window.
struct StageTimes {
  int64_t decode_steps = 0;
  double prefill_s = 0, draft_s = 0, decision_s = 0, verify_s = 0, acceptance_s = 0, commit_s = 0;
  // A mixture of experts: Σ over decode steps without prompt rows (expert_counted_steps) of the
  // distinct experts per sparse layer the verify pass ran (StepStats::verify_experts_per_layer);
  // 0 for a dense target.
  double verify_experts_per_layer = 0;
  int64_t expert_counted_steps = 0;
  // Prompt rows prefilled, and of them those that ran in a verify's pass (mixed prefill).
  int64_t prefill_rows = 0, mixed_prefill_rows = 0;
};

// Verified rows over one stretch of the measured window (the budget over time).
struct BudgetWindow {
  double end_s = 0;              // seconds since the window's start
  double rows_per_step = 0;      // mean Σ k_i of its decode steps
  double requests_per_step = 0;  // mean N of its decode steps
};

struct RunMetrics {
  int64_t requests = 0;
  int64_t output_tokens = 0;
  double window_s = 0;    // first measured submission to last measured finish
  double throughput = 0;  // output tokens / window_s
  Distribution latency_s;
  Distribution ttft_s;
  std::optional<double> tau;                 // unknown for server runs
  std::optional<double> rows_per_step;       // verified rows per decode step
  std::optional<double> rows_per_request;    // verified rows per request per decode step (1..W)
  std::vector<BudgetWindow> rows_over_time;  // in-process: the window in equal stretches
  std::optional<StageTimes> stages;          // in-process runs only
  std::optional<uint64_t> outputs_digest;    // in-process: every measured request's output ids
  std::optional<double> prefix_hit_rate;     // in-process with prefix caching: cached prompt share
};

RunMetrics MetricsFrom(std::span<const RequestSample> samples, double window_s);

struct Cell {
  std::string mode;
  std::string dataset;
  int32_t concurrency = 0;
  std::vector<RunMetrics> runs;  // one per repeat; empty when the mode was not run
};

// A cell over its repeats: the median throughput and its spread, and the median of the repeats'
// mean latencies and its spread (what an open loop compares); the other metrics come from the run
// whose throughput is nearest the median.
struct CellSummary {
  double throughput = 0;
  double spread = 0;  // (max − min) / median of the repeats' throughputs
  double latency_mean = 0;
  double latency_spread = 0;
  const RunMetrics* representative = nullptr;
};
std::optional<CellSummary> Summarize(const Cell& cell);

struct ModeInfo {
  std::string label;
  std::string note;  // shown under the table (e.g. why a rung is not measured)
  bool measured = true;
  bool adaptive = false;  // its budget moves during a run: the table shows rows over time
};

struct Report {
  std::vector<ModeInfo> modes;
  std::vector<std::string> datasets;
  std::vector<int32_t> concurrency;
  std::string baseline;                              // mode label the ratios divide by
  // Requests a second arriving in an open loop (Poisson, at most c in flight); 0: a closed loop.
  double request_rate = 0;
  bool profile = false;                              // render the step-time breakdown
  nlohmann::json config = nlohmann::json::object();  // the run's settings, echoed in JSON
  std::vector<Cell> cells;

  const Cell* Find(const std::string& mode, const std::string& dataset, int32_t c) const;
};

// Per (dataset, c) cell that both measured, and their geometric mean: in a closed loop the
// throughput of `mode` / the baseline's; in an open loop, where the arrivals set the throughput,
// the baseline's mean latency / `mode`'s (above 1: the mode serves the same load faster).
struct RatioRow {
  std::string mode;
  std::vector<double> ratios;  // in (dataset, c) order; NaN where a side is missing
  double geomean = 0;          // over the cells with a ratio; NaN when none
};
std::vector<RatioRow> BaselineRatios(const Report& report);

// Cells whose runs' outputs differ from the baseline mode's in the same (dataset, c) — or
// between their own repeats — as "mode dataset c=N"; nullopt when no run has a digest.
// Greedy decoding is lossless, so at temperature 0 every mode should match the baseline.
std::optional<std::vector<std::string>> OutputMismatches(const Report& report);

std::string RenderTable(const Report& report);
std::string RenderCsv(const Report& report);
nlohmann::json RenderJson(const Report& report);

}  // namespace dscale::bench
