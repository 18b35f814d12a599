// The renderings of a Report: terminal table, CSV, JSON.

#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "bench/report.h"

namespace dscale::bench {
namespace {

std::string Format(const char* format, double value) {
  if (std::isnan(value)) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, value);
  return buffer;
}

std::string Optional(const char* format, const std::optional<double>& value) {
  return value ? Format(format, *value) : "-";
}

// ratio per (mode, dataset, c), from BaselineRatios.
using RatioMap = std::map<std::tuple<std::string, std::string, int32_t>, double>;

RatioMap RatiosByCell(const Report& report) {
  RatioMap out;
  for (const RatioRow& row : BaselineRatios(report)) {
    size_t i = 0;
    for (const std::string& dataset : report.datasets) {
      for (int32_t c : report.concurrency) out[{row.mode, dataset, c}] = row.ratios[i++];
    }
  }
  return out;
}

std::string Row(const std::vector<std::string>& fields, const std::vector<int>& widths) {
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) {
    char buffer[128];
    // Text columns (the first three) left-aligned, numbers right-aligned.
    std::snprintf(buffer, sizeof(buffer), i < 3 ? "%-*s " : "%*s ", widths[i], fields[i].c_str());
    line += buffer;
  }
  line.back() = '\n';
  return line;
}

std::string MainTable(const Report& report, const RatioMap& ratios) {
  const std::vector<int> widths = {10, 4, 14, 9, 7, 8, 8, 8, 8, 8, 8, 6, 9, 8};
  std::string out =
      Row({"dataset", "c", "mode", "tok/s", "spread", "lat_mean", "lat_p50", "lat_p95", "lat_p99",
           "ttft_p50", "ttft_p95", "tau", "rows/step", "vs_" + report.baseline},
          widths);
  for (const std::string& dataset : report.datasets) {
    for (int32_t c : report.concurrency) {
      for (const ModeInfo& mode : report.modes) {
        const Cell* cell = report.Find(mode.label, dataset, c);
        const auto s = cell ? Summarize(*cell) : std::nullopt;
        std::vector<std::string> f = {dataset, std::to_string(c), mode.label};
        if (!s) {
          f.resize(widths.size(), "n/a");
          out += Row(f, widths);
          continue;
        }
        const RunMetrics& r = *s->representative;
        // The spread of the figure the ratio compares: mean latency in an open loop.
        const double spread = report.request_rate > 0 ? s->latency_spread : s->spread;
        for (const std::string& v :
             {Format("%.1f", s->throughput), Format("%.1f%%", 100 * spread),
              Format("%.3f", r.latency_s.mean), Format("%.3f", r.latency_s.p50),
              Format("%.3f", r.latency_s.p95), Format("%.3f", r.latency_s.p99),
              Format("%.3f", r.ttft_s.p50), Format("%.3f", r.ttft_s.p95), Optional("%.2f", r.tau),
              Optional("%.2f", r.rows_per_step),
              Format("%.3fx", ratios.at({mode.label, dataset, c}))}) {
          f.push_back(v);
        }
        out += Row(f, widths);
      }
    }
  }
  return out;
}

std::string ProfileTable(const Report& report) {
  // mixed: the share of prompt rows that ran in a verify's pass (mixed prefill), whose time is
  // then the verify's rather than prefill_s.
  const std::vector<int> widths = {10, 4, 14, 7, 9, 9, 9, 9, 9, 9, 6};
  std::string out = "\nstep time per decode step (ms):\n" +
                    Row({"dataset", "c", "mode", "steps", "draft", "decision", "verify", "accept",
                         "commit", "prefill_s", "mixed"},
                        widths);
  for (const Cell& cell : report.cells) {
    const auto s = Summarize(cell);
    if (!s || !s->representative->stages) continue;
    const StageTimes& t = *s->representative->stages;
    const double per = t.decode_steps > 0 ? 1000.0 / double(t.decode_steps) : NAN;
    out += Row(
        {cell.dataset, std::to_string(cell.concurrency), cell.mode, std::to_string(t.decode_steps),
         Format("%.3f", t.draft_s * per), Format("%.3f", t.decision_s * per),
         Format("%.3f", t.verify_s * per), Format("%.3f", t.acceptance_s * per),
         Format("%.3f", t.commit_s * per), Format("%.3f", t.prefill_s),
         t.prefill_rows > 0
             ? Format("%.0f%%", 100.0 * double(t.mixed_prefill_rows) / double(t.prefill_rows))
             : "-"},
        widths);
  }
  return out;
}

// A mixture-of-experts target: the distinct experts a sparse layer of each cell's verify steps
// ran (steps whose pass ran no prompt rows), beside the verify time per decode step (what rows
// cost there: docs/BENCHMARKS.md, "Mixture of experts"; with mixed prefill it carries the prompt
// rows that rode in verify passes, --no-mixed-prefill leaves the verify alone).
std::string ExpertsTable(const Report& report) {
  std::string out;
  const std::vector<int> widths = {10, 4, 14, 11, 14, 10};
  for (const Cell& cell : report.cells) {
    const auto s = Summarize(cell);
    if (!s || !s->representative->stages) continue;
    const StageTimes& t = *s->representative->stages;
    if (t.verify_experts_per_layer <= 0 || t.expert_counted_steps == 0) continue;
    if (out.empty()) {
      out = "\ndistinct experts per sparse layer per verify step:\n" +
            Row({"dataset", "c", "mode", "rows/step", "experts/layer", "verify ms"}, widths);
    }
    out += Row({cell.dataset, std::to_string(cell.concurrency), cell.mode,
                Optional("%.2f", s->representative->rows_per_step),
                Format("%.1f", t.verify_experts_per_layer / double(t.expert_counted_steps)),
                Format("%.3f", t.verify_s / double(t.decode_steps) * 1000.0)},
               widths);
  }
  return out;
}

// For the adaptive modes: each cell's verified rows per request per step, window by window.
std::string RowsOverTimeTable(const Report& report) {
  std::string out;
  for (const Cell& cell : report.cells) {
    const ModeInfo* mode = nullptr;
    for (const ModeInfo& m : report.modes) {
      if (m.label == cell.mode) mode = &m;
    }
    const auto s = Summarize(cell);
    if (mode == nullptr || !mode->adaptive || !s || s->representative->rows_over_time.empty()) {
      continue;
    }
    if (out.empty()) {
      out =
          "\nverified rows per request per step over the measured window, in 10 equal stretches "
          "(1: plain decoding, W: whole blocks):\n";
    }
    char head[96];
    std::snprintf(head, sizeof(head), "%-10s %-4d %-14s", cell.dataset.c_str(), cell.concurrency,
                  cell.mode.c_str());
    out += head;
    for (const BudgetWindow& w : s->representative->rows_over_time) {
      out += " " +
             Format("%5.2f", w.requests_per_step > 0 ? w.rows_per_step / w.requests_per_step : NAN);
    }
    out += "\n";
  }
  return out;
}

nlohmann::json StagesJson(const StageTimes& t) {
  return {{"decode_steps", t.decode_steps},
          {"prefill_s", t.prefill_s},
          {"draft_s", t.draft_s},
          {"decision_s", t.decision_s},
          {"verify_s", t.verify_s},
          {"acceptance_s", t.acceptance_s},
          {"commit_s", t.commit_s},
          {"verify_experts_per_layer", t.verify_experts_per_layer},
          {"expert_counted_steps", t.expert_counted_steps},
          {"prefill_rows", t.prefill_rows},
          {"mixed_prefill_rows", t.mixed_prefill_rows}};
}

nlohmann::json DistributionJson(const Distribution& d) {
  return {{"mean", d.mean}, {"p50", d.p50}, {"p95", d.p95}, {"p99", d.p99}};
}

nlohmann::json RunJson(const RunMetrics& r) {
  nlohmann::json j = {
      {"requests", r.requests},
      {"output_tokens", r.output_tokens},
      {"window_s", r.window_s},
      {"throughput_tok_s", r.throughput},
      {"latency_s", DistributionJson(r.latency_s)},
      {"ttft_s", DistributionJson(r.ttft_s)},
      {"tau", r.tau ? nlohmann::json(*r.tau) : nlohmann::json()},
      {"rows_per_step", r.rows_per_step ? nlohmann::json(*r.rows_per_step) : nlohmann::json()},
      {"rows_per_request",
       r.rows_per_request ? nlohmann::json(*r.rows_per_request) : nlohmann::json()},
      {"prefix_hit_rate",
       r.prefix_hit_rate ? nlohmann::json(*r.prefix_hit_rate) : nlohmann::json()}};
  if (r.stages) j["stages"] = StagesJson(*r.stages);
  if (!r.rows_over_time.empty()) {
    nlohmann::json windows = nlohmann::json::array();
    for (const BudgetWindow& w : r.rows_over_time) {
      windows.push_back({{"end_s", w.end_s},
                         {"rows_per_step", w.rows_per_step},
                         {"requests_per_step", w.requests_per_step}});
    }
    j["rows_over_time"] = windows;
  }
  if (r.outputs_digest) {
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(*r.outputs_digest));
    j["outputs_digest"] = hex;
  }
  return j;
}

}  // namespace

std::string RenderTable(const Report& report) {
  const RatioMap ratios = RatiosByCell(report);
  std::string out = MainTable(report, ratios);
  out +=
      report.request_rate > 0
          ? "\nopen loop, " + Format("%.3g", report.request_rate) +
                " requests/s arriving (Poisson), at most c in flight: " + report.baseline +
                "'s mean latency / the mode's, geometric mean over dataset x concurrency:\n"
          : "\nthroughput vs " + report.baseline + ", geometric mean over dataset x concurrency:\n";
  for (const RatioRow& row : BaselineRatios(report)) {
    out += "  " + row.mode + ": " + Format("%.3fx", row.geomean) + "\n";
  }
  for (const ModeInfo& mode : report.modes) {
    if (!mode.note.empty()) out += "note: " + mode.label + ": " + mode.note + "\n";
  }
  if (const auto mismatches = OutputMismatches(report)) {
    if (mismatches->empty()) {
      out += "outputs: every run generated the same tokens as " + report.baseline +
             " for every request\n";
    } else {
      out += "outputs: differ from " + report.baseline + "'s in";
      for (const std::string& m : *mismatches) out += " [" + m + "]";
      const nlohmann::json& t = report.config.is_object() && report.config.contains("temperature")
                                    ? report.config["temperature"]
                                    : nlohmann::json();
      const bool sampling = t.is_number() && t.get<double>() > 0;
      out += sampling ? " (sampling draws each token by its position: only a float near-tie at a "
                        "draw may differ)\n"
                      : " (greedy: only float near-ties may differ)\n";
    }
  }
  out += RowsOverTimeTable(report);
  if (report.profile) out += ProfileTable(report) + ExpertsTable(report);
  return out;
}

std::string RenderCsv(const Report& report) {
  const RatioMap ratios = RatiosByCell(report);
  std::string out =
      "mode,dataset,concurrency,repeats,requests,output_tokens,window_s,throughput_tok_s,"
      "throughput_spread,latency_mean_s,latency_p50_s,latency_p95_s,latency_p99_s,ttft_mean_s,"
      "ttft_p50_s,ttft_p95_s,ttft_p99_s,tau,rows_per_step,rows_per_request,ratio_vs_baseline,"
      "decode_steps,"
      "prefill_s,draft_s,decision_s,verify_s,acceptance_s,commit_s\n";
  for (const Cell& cell : report.cells) {
    const auto s = Summarize(cell);
    if (!s) continue;
    const RunMetrics& r = *s->representative;
    const StageTimes t = r.stages.value_or(StageTimes{});
    std::vector<std::string> f = {cell.mode,
                                  cell.dataset,
                                  std::to_string(cell.concurrency),
                                  std::to_string(cell.runs.size()),
                                  std::to_string(r.requests),
                                  std::to_string(r.output_tokens)};
    for (double v :
         {r.window_s, s->throughput, s->spread, r.latency_s.mean, r.latency_s.p50, r.latency_s.p95,
          r.latency_s.p99, r.ttft_s.mean, r.ttft_s.p50, r.ttft_s.p95, r.ttft_s.p99,
          r.tau.value_or(NAN), r.rows_per_step.value_or(NAN), r.rows_per_request.value_or(NAN),
          ratios.at({cell.mode, cell.dataset, cell.concurrency})}) {
      f.push_back(std::isnan(v) ? "" : Format("%.6g", v));
    }
    f.push_back(r.stages ? std::to_string(t.decode_steps) : "");
    for (double v :
         {t.prefill_s, t.draft_s, t.decision_s, t.verify_s, t.acceptance_s, t.commit_s}) {
      f.push_back(r.stages ? Format("%.6g", v) : "");
    }
    for (size_t i = 0; i < f.size(); ++i) out += (i ? "," : "") + f[i];
    out += "\n";
  }
  return out;
}

nlohmann::json RenderJson(const Report& report) {
  const RatioMap ratios = RatiosByCell(report);
  nlohmann::json modes = nlohmann::json::array();
  for (const ModeInfo& m : report.modes) {
    modes.push_back(
        {{"label", m.label}, {"note", m.note}, {"measured", m.measured}, {"adaptive", m.adaptive}});
  }
  nlohmann::json cells = nlohmann::json::array();
  for (const Cell& cell : report.cells) {
    const auto s = Summarize(cell);
    nlohmann::json runs = nlohmann::json::array();
    for (const RunMetrics& r : cell.runs) runs.push_back(RunJson(r));
    cells.push_back({{"mode", cell.mode},
                     {"dataset", cell.dataset},
                     {"concurrency", cell.concurrency},
                     {"throughput_tok_s", s ? nlohmann::json(s->throughput) : nlohmann::json()},
                     {"throughput_spread", s ? nlohmann::json(s->spread) : nlohmann::json()},
                     {"latency_mean_s", s ? nlohmann::json(s->latency_mean) : nlohmann::json()},
                     {"latency_spread", s ? nlohmann::json(s->latency_spread) : nlohmann::json()},
                     {"ratio_vs_baseline", ratios.at({cell.mode, cell.dataset, cell.concurrency})},
                     {"runs", runs}});
  }
  nlohmann::json geomeans = nlohmann::json::object();
  for (const RatioRow& row : BaselineRatios(report)) geomeans[row.mode] = row.geomean;
  nlohmann::json output_check;  // null when no run has output digests
  if (const auto mismatches = OutputMismatches(report)) {
    output_check = {{"identical_to_baseline", mismatches->empty()},
                    {"differing_cells", *mismatches}};
  }
  return {{"config", report.config},
          {"baseline", report.baseline},
          {"outputs_vs_baseline", output_check},
          {"datasets", report.datasets},
          {"concurrency", report.concurrency},
          {"modes", modes},
          {"cells", cells},
          {"geomean_ratio_vs_baseline", geomeans}};
}

}  // namespace dscale::bench
