#pragma once
// PNG plots of throughput and latency against concurrency, one line per mode and one pair of
// panels per dataset, drawn by gnuplot. The data files and the gnuplot script are always
// written (so the plots can be redrawn elsewhere); the PNGs only when gnuplot is installed.

#include <string>

#include "bench/report.h"
#include "core/status.h"

namespace dscale::bench {

struct PlotResult {
  std::string script;  // the gnuplot script's path
  bool drawn = false;  // false: gnuplot is not installed
};

// Writes `dir`/plot_data_<dataset>.dat, `dir`/plots.gp and, with gnuplot, throughput.png and
// latency.png into `dir`.
Result<PlotResult> WritePlots(const Report& report, const std::string& dir);

// Writes `text` to `path` (replacing it). IoError names the path.
Status WriteTextFile(const std::string& path, const std::string& text);

// The gnuplot script for `report` reading data files from `dir` (exposed for tests).
std::string GnuplotScript(const Report& report, const std::string& dir);

}  // namespace dscale::bench
