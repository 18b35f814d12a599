#include "bench/report.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dscale::bench {

RunMetrics MetricsFrom(std::span<const RequestSample> samples, double window_s) {
  RunMetrics m{.requests = static_cast<int64_t>(samples.size()), .window_s = window_s};
  std::vector<double> latency, ttft;
  for (const RequestSample& s : samples) {
    m.output_tokens += s.output_tokens;
    latency.push_back(s.latency_s);
    ttft.push_back(s.ttft_s);
  }
  m.throughput = window_s > 0 ? double(m.output_tokens) / window_s : 0.0;
  m.latency_s = Summarize(latency);
  m.ttft_s = Summarize(ttft);
  return m;
}

std::optional<CellSummary> Summarize(const Cell& cell) {
  if (cell.runs.empty()) return std::nullopt;
  std::vector<double> throughputs, latencies;
  for (const RunMetrics& r : cell.runs) {
    throughputs.push_back(r.throughput);
    latencies.push_back(r.latency_s.mean);
  }
  CellSummary s{.throughput = Median(throughputs),
                .spread = RelativeSpread(throughputs),
                .latency_mean = Median(latencies),
                .latency_spread = RelativeSpread(latencies)};
  double best = std::numeric_limits<double>::infinity();
  for (const RunMetrics& r : cell.runs) {
    const double distance = std::abs(r.throughput - s.throughput);
    if (distance < best) {
      best = distance;
      s.representative = &r;
    }
  }
  return s;
}

const Cell* Report::Find(const std::string& mode, const std::string& dataset, int32_t c) const {
  for (const Cell& cell : cells) {
    if (cell.mode == mode && cell.dataset == dataset && cell.concurrency == c) return &cell;
  }
  return nullptr;
}

std::vector<RatioRow> BaselineRatios(const Report& report) {
  const bool open = report.request_rate > 0;
  std::vector<RatioRow> rows;
  for (const ModeInfo& mode : report.modes) {
    RatioRow row{.mode = mode.label};
    std::vector<double> present;
    for (const std::string& dataset : report.datasets) {
      for (int32_t c : report.concurrency) {
        const Cell* cell = report.Find(mode.label, dataset, c);
        const Cell* base = report.Find(report.baseline, dataset, c);
        double ratio = std::numeric_limits<double>::quiet_NaN();
        if (cell != nullptr && base != nullptr && !cell->runs.empty() && !base->runs.empty()) {
          const CellSummary a = *Summarize(*cell), b = *Summarize(*base);
          // A ratio of positive figures only (NaN where the divisor is 0).
          const double num = open ? b.latency_mean : a.throughput;
          const double den = open ? a.latency_mean : b.throughput;
          if (den > 0) {
            ratio = num / den;
            present.push_back(ratio);
          }
        }
        row.ratios.push_back(ratio);
      }
    }
    row.geomean = GeoMean(present);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::optional<std::vector<std::string>> OutputMismatches(const Report& report) {
  bool any_digest = false;
  std::vector<std::string> mismatches;
  for (const Cell& cell : report.cells) {
    const Cell* base = report.Find(report.baseline, cell.dataset, cell.concurrency);
    if (base == nullptr || base->runs.empty() || !base->runs.front().outputs_digest) continue;
    const uint64_t want = *base->runs.front().outputs_digest;
    for (const RunMetrics& run : cell.runs) {
      if (!run.outputs_digest) continue;
      any_digest = true;
      if (*run.outputs_digest != want) {
        mismatches.push_back(cell.mode + " " + cell.dataset +
                             " c=" + std::to_string(cell.concurrency));
        break;
      }
    }
  }
  if (!any_digest) return std::nullopt;
  return mismatches;
}

}  // namespace dscale::bench
