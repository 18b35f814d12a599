// Repeat agreement between two runs of the harness: the rule, the results.json round trip and
// the errors for malformed files.

#include "bench/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace dscale::bench {
namespace {

RunMetrics Run(double throughput) {
  const std::vector<RequestSample> samples = {
      {.latency_s = 1, .ttft_s = 0.1, .output_tokens = 100}};
  return MetricsFrom(samples, 100.0 / throughput);
}

// One mode, one dataset, c = 8 and 16, with the given repeats' throughputs per cell.
Report ReportWith(std::vector<double> c8, std::vector<double> c16) {
  Report r{.modes = {{.label = "dscale"}},
           .datasets = {"gsm8k"},
           .concurrency = {8, 16},
           .baseline = "dscale"};
  r.config = {{"requests", 64}, {"max_tokens", 128}};
  Cell a{.mode = "dscale", .dataset = "gsm8k", .concurrency = 8};
  for (double t : c8) a.runs.push_back(Run(t));
  Cell b{.mode = "dscale", .dataset = "gsm8k", .concurrency = 16};
  for (double t : c16) b.runs.push_back(Run(t));
  r.cells = {a, b};
  return r;
}

Result<PriorRun> RoundTrip(const Report& report) {
  const nlohmann::json results = RenderJson(report);
  Result<std::vector<PriorCell>> cells = ParsePriorCells(results);
  if (!cells.ok()) return cells.status();
  return PriorRun{.cells = *cells, .config = results["config"]};
}

TEST(Compare, AgreesWhenTheMediansDifferByLessThanTheLargerSpread) {
  // Before: c=8 median 100, spread 10%; c=16 median 200, spread 5%.
  const Result<PriorRun> before = RoundTrip(ReportWith({95, 100, 105}, {195, 200, 205}));
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  ASSERT_EQ(before->cells.size(), 2u);
  EXPECT_DOUBLE_EQ(before->cells[0].throughput, 100);
  EXPECT_NEAR(before->cells[0].spread, 0.10, 1e-12);

  // Now: c=8 median 108 (8% off, within 10%); c=16 median 215 (7.5% off, spreads 5% and 4.7%).
  const Agreement agreement = CompareRuns(ReportWith({104, 108, 110}, {210, 215, 220}), *before);
  ASSERT_EQ(agreement.cells.size(), 2u);
  EXPECT_TRUE(agreement.cells[0].agree);
  EXPECT_NEAR(agreement.cells[0].difference, 0.08, 1e-12);
  EXPECT_FALSE(agreement.cells[1].agree);
  EXPECT_EQ(agreement.agreeing(), 1);
  EXPECT_TRUE(agreement.settings_differ.empty());

  const std::string text = RenderAgreement(agreement);
  EXPECT_NE(text.find("1 of 2 cells agree"), std::string::npos) << text;
  EXPECT_NE(text.find("NO"), std::string::npos) << text;
  EXPECT_EQ(AgreementJson(agreement)["agreeing"], 1);
}

// In an open loop the arrivals set the throughput: the runs agree or not on mean latency.
TEST(Compare, AnOpenLoopComparesMeanLatency) {
  auto open = [](std::vector<double> c8_latency, std::vector<double> c16_latency) {
    Report r = ReportWith(std::vector<double>(c8_latency.size(), 100),
                          std::vector<double>(c16_latency.size(), 100));
    r.request_rate = 2;
    for (size_t i = 0; i < c8_latency.size(); ++i)
      r.cells[0].runs[i].latency_s.mean = c8_latency[i];
    for (size_t i = 0; i < c16_latency.size(); ++i) {
      r.cells[1].runs[i].latency_s.mean = c16_latency[i];
    }
    return r;
  };
  const Result<PriorRun> before = RoundTrip(open({4.0, 4.4, 4.2}, {8.0, 8.2, 8.4}));
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  // Same throughputs throughout; c = 16's latency 20% higher, beyond either spread.
  const Agreement agreement = CompareRuns(open({4.1, 4.3, 4.2}, {9.9, 10.0, 10.1}), *before);
  ASSERT_EQ(agreement.cells.size(), 2u);
  EXPECT_TRUE(agreement.latency);
  EXPECT_TRUE(agreement.cells[0].agree);
  EXPECT_DOUBLE_EQ(agreement.cells[1].before, 8.2);
  EXPECT_DOUBLE_EQ(agreement.cells[1].now, 10.0);
  EXPECT_FALSE(agreement.cells[1].agree);
  EXPECT_NE(RenderAgreement(agreement).find("in mean latency (s)"), std::string::npos);
  EXPECT_TRUE(AgreementJson(agreement)["cells"][1].contains("now_latency_s"));
  // A closed-loop file has latencies too, but one without them compares nothing and agrees on
  // nothing.
  PriorRun old = *before;
  for (PriorCell& cell : old.cells) cell.latency_mean = cell.latency_spread = NAN;
  EXPECT_EQ(CompareRuns(open({4.2}, {8.2}), old).agreeing(), 0);
}

TEST(Compare, OneRepeatHasNoSpreadAndSaysSo) {
  const Result<PriorRun> before = RoundTrip(ReportWith({100}, {200}));
  ASSERT_TRUE(before.ok());
  const Agreement agreement = CompareRuns(ReportWith({100}, {201}), *before);
  EXPECT_TRUE(agreement.cells[0].agree);  // identical medians
  EXPECT_FALSE(agreement.cells[1].agree);
  EXPECT_NE(RenderAgreement(agreement).find("--repeats"), std::string::npos);
}

TEST(Compare, NamesSettingsThatDifferAndSkipsCellsOnlyOneRunHas) {
  Result<PriorRun> before = RoundTrip(ReportWith({100, 100}, {200, 200}));
  ASSERT_TRUE(before.ok());
  before->config["max_tokens"] = 256;
  before->cells.pop_back();  // the earlier run did not measure c = 16
  const Agreement agreement = CompareRuns(ReportWith({100, 100}, {200, 200}), *before);
  ASSERT_EQ(agreement.cells.size(), 1u);
  EXPECT_EQ(agreement.cells[0].concurrency, 8);
  EXPECT_EQ(agreement.settings_differ, std::vector<std::string>{"max_tokens"});
  EXPECT_NE(RenderAgreement(agreement).find("'max_tokens'"), std::string::npos);
}

TEST(Compare, UnmeasuredCellsAreSkipped) {
  Report r = ReportWith({100}, {200});
  r.cells.push_back({.mode = "graphs", .dataset = "gsm8k", .concurrency = 8});  // no runs
  r.modes.push_back({.label = "graphs", .measured = false});
  const Result<std::vector<PriorCell>> cells = ParsePriorCells(RenderJson(r));
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  EXPECT_EQ(cells->size(), 2u);
}

TEST(Compare, MalformedResultsNameTheField) {
  const auto error = [](const nlohmann::json& j) {
    const Result<std::vector<PriorCell>> cells = ParsePriorCells(j);
    return cells.ok() ? std::string("ok") : cells.status().ToString();
  };
  EXPECT_NE(error(nlohmann::json::array()).find("\"cells\""), std::string::npos);
  EXPECT_NE(error({{"cells", {1}}}).find("cells[0] is not an object"), std::string::npos);
  EXPECT_NE(error({{"cells", {{{"mode", "a"}, {"dataset", 3}}}}}).find("cells[0].dataset"),
            std::string::npos);
  EXPECT_NE(
      error({{"cells",
              {{{"mode", "a"}, {"dataset", "b"}, {"concurrency", 8}, {"throughput_tok_s", 1.0}}}}})
          .find("cells[0].throughput_spread"),
      std::string::npos);
}

TEST(Compare, LoadPriorRunNamesTheFile) {
  const Result<PriorRun> missing = LoadPriorRun("/nonexistent/results.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().ToString().find("/nonexistent/results.json"), std::string::npos);
}

}  // namespace
}  // namespace dscale::bench
