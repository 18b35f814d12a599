#include "bench/plots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace dscale::bench {
namespace {

std::string DataPath(const std::string& dir, const std::string& dataset) {
  return dir + "/plot_data_" + dataset + ".dat";
}

// Columns: c, then per mode (in report order) throughput and p50 latency; "?" where missing.
std::string DataFile(const Report& report, const std::string& dataset) {
  std::string out = "# c";
  for (const ModeInfo& m : report.modes) out += " tok/s[" + m.label + "] p50_s[" + m.label + "]";
  out += "\n";
  for (int32_t c : report.concurrency) {
    out += std::to_string(c);
    for (const ModeInfo& m : report.modes) {
      const Cell* cell = report.Find(m.label, dataset, c);
      const auto s = cell ? Summarize(*cell) : std::nullopt;
      char buffer[64];
      if (s) {
        std::snprintf(buffer, sizeof(buffer), " %.6g %.6g", s->throughput,
                      s->representative->latency_s.p50);
      } else {
        std::snprintf(buffer, sizeof(buffer), " ? ?");
      }
      out += buffer;
    }
    out += "\n";
  }
  return out;
}

// One multiplot PNG: a panel per dataset; `column_offset` 2 plots throughput, 3 latency.
std::string Panels(const Report& report, const std::string& dir, const std::string& png,
                   const std::string& ylabel, int column_offset) {
  const size_t n = report.datasets.size();
  std::string out = "set output '" + dir + "/" + png + "'\n";
  out += "set multiplot layout 1," + std::to_string(n) + "\nset ylabel '" + ylabel + "'\n";
  for (const std::string& dataset : report.datasets) {
    out += "set title '" + dataset + "'\nplot ";
    for (size_t m = 0; m < report.modes.size(); ++m) {
      const int column = column_offset + 2 * static_cast<int>(m);
      out += std::string(m ? ", \\\n     " : "") + "'" + DataPath(dir, dataset) +
             "' using 1:" + std::to_string(column) + " with linespoints title '" +
             report.modes[m].label + "'";
    }
    out += "\n";
  }
  return out + "unset multiplot\n";
}

// The x range half a doubling beyond the smallest and largest concurrency, so the end points
// sit off the frame; gnuplot's own range from a single concurrency would be empty (it widens
// it with a warning on the terminal).
std::string ConcurrencyRange(const std::vector<int32_t>& concurrency) {
  if (concurrency.empty()) return "";
  const auto [lo, hi] = std::ranges::minmax(concurrency);
  char range[96];
  std::snprintf(range, sizeof range, "set xrange [%g:%g]\n", lo / std::sqrt(2.0),
                hi * std::sqrt(2.0));
  return range;
}

bool GnuplotInstalled() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

}  // namespace

Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return IoError(path + ": cannot open for writing");
  file << text;
  file.close();
  if (!file) return IoError(path + ": write failed");
  return Status::Ok();
}

std::string GnuplotScript(const Report& report, const std::string& dir) {
  const size_t n = std::max<size_t>(report.datasets.size(), 1);
  std::string out = "set terminal pngcairo size " + std::to_string(480 * n) +
                    ",400 font ',10'\nset datafile missing '?'\nset key top left\n"
                    "set xlabel 'concurrency c'\nset grid\nset logscale x 2\n"
                    "set xtics (";
  for (size_t i = 0; i < report.concurrency.size(); ++i) {
    out += (i ? ", " : "") + std::to_string(report.concurrency[i]);
  }
  out += ")\n" + ConcurrencyRange(report.concurrency) + "set yrange [0:*]\n";
  out += Panels(report, dir, "throughput.png", "output tokens / s", 2);
  out += Panels(report, dir, "latency.png", "p50 end-to-end latency (s)", 3);
  return out;
}

Result<PlotResult> WritePlots(const Report& report, const std::string& dir) {
  for (const std::string& dataset : report.datasets) {
    DSCALE_RETURN_IF_ERROR(WriteTextFile(DataPath(dir, dataset), DataFile(report, dataset)));
  }
  PlotResult result{.script = dir + "/plots.gp"};
  DSCALE_RETURN_IF_ERROR(WriteTextFile(result.script, GnuplotScript(report, dir)));
  if (!GnuplotInstalled()) return result;
  const std::string command = "gnuplot '" + result.script + "' 2>&1";
  if (std::system(command.c_str()) != 0) return IoError("gnuplot failed on " + result.script);
  result.drawn = true;
  return result;
}

}  // namespace dscale::bench
