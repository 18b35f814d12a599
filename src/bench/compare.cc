#include "bench/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "io/file_util.h"
#include "io/json_util.h"

namespace dscale::bench {
namespace {

Result<PriorCell> ParsePriorCell(const nlohmann::json& j, size_t index) {
  const std::string where = "cells[" + std::to_string(index) + "]";
  if (!j.is_object()) return InvalidArgument(where + " is not an object");
  PriorCell cell;
  for (const auto& [key, field] :
       {std::pair{"mode", &cell.mode}, std::pair{"dataset", &cell.dataset}}) {
    const nlohmann::json* value = JsonMember(j, key);
    if (value == nullptr || !value->is_string()) {
      return InvalidArgument(where + "." + key + " must be a string");
    }
    *field = value->get<std::string>();
  }
  // Checked as the JSON number it is before it is narrowed.
  const nlohmann::json* concurrency = JsonMember(j, "concurrency");
  const Result<int32_t> c = concurrency == nullptr
                                ? Result<int32_t>(InvalidArgument("missing"))
                                : ReadJsonIntAs<int32_t>(*concurrency, where + ".concurrency", 1);
  if (!c.ok()) return InvalidArgument(where + ".concurrency must be a positive 32-bit integer");
  cell.concurrency = *c;
  for (const auto& [key, field] : {std::pair{"throughput_tok_s", &cell.throughput},
                                   std::pair{"throughput_spread", &cell.spread}}) {
    const nlohmann::json* value = JsonMember(j, key);
    const Result<double> x = value == nullptr ? Result<double>(InvalidArgument("missing"))
                                              : ReadJsonNumber(*value, where + "." + key);
    if (!x.ok()) return InvalidArgument(where + "." + key + " must be a number");
    *field = *x;
  }
  // Written since open loops were added; an older file has no latency to compare.
  for (const auto& [key, field] : {std::pair{"latency_mean_s", &cell.latency_mean},
                                   std::pair{"latency_spread", &cell.latency_spread}}) {
    const nlohmann::json* value = JsonMember(j, key);
    const Result<double> x =
        value == nullptr ? Result<double>(NAN) : ReadJsonNumber(*value, where + "." + key);
    if (!x.ok()) return InvalidArgument(where + "." + key + " must be a number");
    *field = *x;
  }
  return cell;
}

std::vector<std::string> DifferingSettings(const nlohmann::json& now,
                                           const nlohmann::json& before) {
  std::vector<std::string> keys;
  if (!now.is_object() || !before.is_object()) return keys;
  for (const auto& [key, value] : now.items()) {
    if (!before.contains(key) || before[key] != value) keys.push_back(key);
  }
  for (const auto& [key, value] : before.items()) {
    if (!now.contains(key)) keys.push_back(key);
  }
  return keys;
}

}  // namespace

Result<std::vector<PriorCell>> ParsePriorCells(const nlohmann::json& results) {
  if (!results.is_object() || !results.contains("cells") || !results["cells"].is_array()) {
    return InvalidArgument("expected a results.json object with a \"cells\" array");
  }
  std::vector<PriorCell> cells;
  const nlohmann::json& array = results["cells"];
  for (size_t i = 0; i < array.size(); ++i) {
    // Cells of modes that were not measured carry nulls; they have nothing to compare.
    if (array[i].is_object() && array[i].contains("throughput_tok_s") &&
        array[i]["throughput_tok_s"].is_null()) {
      continue;
    }
    DSCALE_ASSIGN_OR_RETURN(PriorCell cell, ParsePriorCell(array[i], i));
    cells.push_back(std::move(cell));
  }
  return cells;
}

Result<PriorRun> LoadPriorRun(const std::string& path) {
  Result<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  Result<nlohmann::json> results = ParseJsonDocument(*text);
  if (!results.ok()) return results.status().WithContext(path);
  Result<std::vector<PriorCell>> cells = ParsePriorCells(*results);
  if (!cells.ok()) return cells.status().WithContext(path);
  PriorRun run{.cells = std::move(*cells)};
  if (results->contains("config") && (*results)["config"].is_object()) {
    run.config = (*results)["config"];
  }
  return run;
}

int64_t Agreement::agreeing() const {
  return std::count_if(cells.begin(), cells.end(), [](const CellAgreement& c) { return c.agree; });
}

Agreement CompareRuns(const Report& now, const PriorRun& prior_run) {
  Agreement result{.latency = now.request_rate > 0,
                   .settings_differ = DifferingSettings(now.config, prior_run.config)};
  const std::vector<PriorCell>& before = prior_run.cells;
  for (const Cell& cell : now.cells) {
    const std::optional<CellSummary> s = Summarize(cell);
    if (!s) continue;
    const auto prior = std::find_if(before.begin(), before.end(), [&](const PriorCell& p) {
      return p.mode == cell.mode && p.dataset == cell.dataset && p.concurrency == cell.concurrency;
    });
    if (prior == before.end()) continue;
    const bool latency = result.latency;
    CellAgreement a{.mode = cell.mode,
                    .dataset = cell.dataset,
                    .concurrency = cell.concurrency,
                    .before = latency ? prior->latency_mean : prior->throughput,
                    .now = latency ? s->latency_mean : s->throughput,
                    .spread_before = latency ? prior->latency_spread : prior->spread,
                    .spread_now = latency ? s->latency_spread : s->spread};
    a.difference = a.before > 0 ? std::abs(a.now - a.before) / a.before : NAN;
    // NaN (an earlier file without latencies) never agrees.
    a.agree = a.difference <= std::max(a.spread_before, a.spread_now);
    result.cells.push_back(std::move(a));
  }
  return result;
}

std::string RenderAgreement(const Agreement& agreement) {
  std::string out = std::string("\nagreement with the earlier run in ") +
                    (agreement.latency ? "mean latency (s)" : "throughput (tok/s)") +
                    " (|now - before| / before <= max spread):\n";
  char line[160];
  std::snprintf(line, sizeof(line), "%-10s %-4s %-12s %10s %10s %8s %8s %14s  %s\n", "dataset", "c",
                "mode", "before", "now", "diff", "spread", "spread_before", "agree");
  out += line;
  for (const CellAgreement& c : agreement.cells) {
    std::snprintf(
        line, sizeof(line),
        agreement.latency ? "%-10s %-4d %-12s %10.3f %10.3f %7.1f%% %7.1f%% %13.1f%%  %s\n"
                          : "%-10s %-4d %-12s %10.1f %10.1f %7.1f%% %7.1f%% %13.1f%%  %s\n",
        c.dataset.c_str(), c.concurrency, c.mode.c_str(), c.before, c.now, 100 * c.difference,
        100 * c.spread_now, 100 * c.spread_before, c.agree ? "yes" : "NO");
    out += line;
  }
  out += std::to_string(agreement.agreeing()) + " of " + std::to_string(agreement.cells.size()) +
         " cells agree";
  out += agreement.cells.empty() ? " (no cell was measured in both runs)\n" : "\n";
  for (const std::string& key : agreement.settings_differ) {
    out += "note: the runs' settings differ in '" + key + "'\n";
  }
  if (!agreement.cells.empty() &&
      std::all_of(agreement.cells.begin(), agreement.cells.end(), [](const CellAgreement& c) {
        return c.spread_now == 0 && c.spread_before == 0;
      })) {
    out += "note: with one repeat per cell the spread is 0; use --repeats 3 to measure it\n";
  }
  return out;
}

nlohmann::json AgreementJson(const Agreement& agreement) {
  nlohmann::json cells = nlohmann::json::array();
  for (const CellAgreement& c : agreement.cells) {
    cells.push_back({{"mode", c.mode},
                     {"dataset", c.dataset},
                     {"concurrency", c.concurrency},
                     {agreement.latency ? "before_latency_s" : "before_tok_s", c.before},
                     {agreement.latency ? "now_latency_s" : "now_tok_s", c.now},
                     {"spread_before", c.spread_before},
                     {"spread_now", c.spread_now},
                     {"difference", c.difference},
                     {"agree", c.agree}});
  }
  return {{"cells", cells},
          {"agreeing", agreement.agreeing()},
          {"settings_differ", agreement.settings_differ}};
}

}  // namespace dscale::bench
