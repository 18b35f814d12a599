#include "bench/sweep.h"

namespace dscale::bench {

int64_t SweepRequests(const SweepPlan& plan) {
  int64_t runnable = 0;
  for (const BenchMode& m : plan.modes) runnable += m.runnable ? 1 : 0;
  return runnable * int64_t(plan.datasets.size()) * int64_t(plan.concurrency.size()) *
         plan.repeats * plan.requests_per_cell;
}

Result<Report> RunSweep(const SweepPlan& plan, const std::string& baseline,
                        const CellRunner& run_cell, Progress* progress) {
  Report report{.datasets = plan.datasets, .concurrency = plan.concurrency, .baseline = baseline};
  bool baseline_found = false;
  for (const BenchMode& m : plan.modes) {
    report.modes.push_back(
        {.label = m.label, .note = m.note, .measured = m.runnable, .adaptive = m.adaptive});
    baseline_found |= m.runnable && m.label == baseline;
  }
  if (!baseline_found) {
    return InvalidArgument("--baseline '" + baseline + "' is not one of the measured modes");
  }
  for (const BenchMode& m : plan.modes) {
    for (const std::string& dataset : plan.datasets) {
      for (int32_t c : plan.concurrency) {
        report.cells.push_back({.mode = m.label, .dataset = dataset, .concurrency = c});
      }
    }
  }
  const auto advance = [progress] {
    if (progress != nullptr) progress->Advance();
  };
  for (int32_t repeat = 0; repeat < plan.repeats; ++repeat) {
    size_t cell_index = 0;
    for (const BenchMode& m : plan.modes) {
      for (const std::string& dataset : plan.datasets) {
        for (int32_t c : plan.concurrency) {
          Cell& cell = report.cells[cell_index++];
          if (!m.runnable) continue;
          const std::string name = m.label + " " + dataset + " c=" + std::to_string(c);
          if (progress != nullptr) {
            progress->SetLabel(name + (plan.repeats > 1 ? " repeat " + std::to_string(repeat + 1)
                                                        : std::string()));
          }
          Result<RunMetrics> metrics = run_cell(m, dataset, c, advance);
          if (!metrics.ok()) return metrics.status().WithContext(name);
          cell.runs.push_back(std::move(*metrics));
        }
      }
    }
  }
  return report;
}

}  // namespace dscale::bench
