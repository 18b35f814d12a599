#pragma once
// The sweep: every (mode, dataset, concurrency) cell, `repeats` times. Repeats are the outer
// loop, so each repeat runs all modes one after another on the same manifests and slow drift
// of the machine shows up in the reported spread rather than as a difference between modes.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/modes.h"
#include "bench/progress.h"
#include "bench/report.h"
#include "core/status.h"

namespace dscale::bench {

struct SweepPlan {
  std::vector<BenchMode> modes;
  std::vector<std::string> datasets;
  std::vector<int32_t> concurrency;
  int32_t repeats = 1;
  int32_t requests_per_cell = 0;  // warm-up + measured, for the progress bar
};

// Measures one cell once; `on_done` is called per finished request (warm-up included).
using CellRunner =
    std::function<Result<RunMetrics>(const BenchMode& mode, const std::string& dataset,
                                     int32_t concurrency, const std::function<void()>& on_done)>;

// The requests the whole sweep sends (for a progress bar's total).
int64_t SweepRequests(const SweepPlan& plan);

// Runs the plan. `baseline` must be one of the runnable modes' labels. Errors name the cell.
Result<Report> RunSweep(const SweepPlan& plan, const std::string& baseline,
                        const CellRunner& run_cell, Progress* progress);

}  // namespace dscale::bench
