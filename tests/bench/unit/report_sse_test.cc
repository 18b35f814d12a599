#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "bench/http_client.h"
#include "bench/plots.h"
#include "bench/report.h"
#include "bench/request_loop.h"
#include "bench/sweep.h"

namespace dscale::bench {
namespace {

RunMetrics FakeRun(double throughput) {
  const std::vector<RequestSample> samples = {
      {.latency_s = 1.0, .ttft_s = 0.1, .output_tokens = 10},
      {.latency_s = 3.0, .ttft_s = 0.3, .output_tokens = 30}};
  RunMetrics m = MetricsFrom(samples, 40.0 / throughput);
  m.tau = 2.5;
  m.rows_per_step = 12.0;
  return m;
}

// Two modes, two datasets, one concurrency; "fast" is 2x and 8x "base".
Report TwoModeReport() {
  Report r{.modes = {{.label = "base"}, {.label = "fast"}},
           .datasets = {"gsm8k", "humaneval"},
           .concurrency = {8},
           .baseline = "base"};
  r.cells.push_back({.mode = "base", .dataset = "gsm8k", .concurrency = 8, .runs = {FakeRun(10)}});
  r.cells.push_back(
      {.mode = "base", .dataset = "humaneval", .concurrency = 8, .runs = {FakeRun(10)}});
  r.cells.push_back({.mode = "fast", .dataset = "gsm8k", .concurrency = 8, .runs = {FakeRun(20)}});
  r.cells.push_back({.mode = "fast",
                     .dataset = "humaneval",
                     .concurrency = 8,
                     .runs = {FakeRun(70), FakeRun(80), FakeRun(90)}});
  return r;
}

TEST(Report, OutputDigestsAreComparedWithTheBaseline) {
  Report r = TwoModeReport();
  EXPECT_FALSE(OutputMismatches(r).has_value());  // no digests: nothing to say
  EXPECT_EQ(RenderTable(r).find("outputs:"), std::string::npos);
  for (Cell& cell : r.cells) {
    for (RunMetrics& run : cell.runs) run.outputs_digest = cell.dataset == "gsm8k" ? 1 : 2;
  }
  ASSERT_TRUE(OutputMismatches(r).has_value());
  EXPECT_TRUE(OutputMismatches(r)->empty());
  EXPECT_NE(RenderTable(r).find("outputs: every run generated the same tokens as base"),
            std::string::npos);
  r.cells[3].runs[1].outputs_digest = 7;  // one repeat of fast/humaneval differs
  EXPECT_EQ(*OutputMismatches(r), std::vector<std::string>{"fast humaneval c=8"});
  EXPECT_NE(RenderTable(r).find("differ from base's in [fast humaneval c=8]"), std::string::npos);
  EXPECT_EQ(RenderJson(r)["outputs_vs_baseline"]["identical_to_baseline"], false);
  EXPECT_EQ(RenderJson(r)["cells"][3]["runs"][1]["outputs_digest"], "0000000000000007");
}

TEST(Report, TokenHashesSeparateOrderAndContent) {
  const std::vector<int32_t> a = {1, 2, 3}, b = {3, 2, 1}, c = {1, 2};
  EXPECT_NE(HashTokens(a), HashTokens(b));
  EXPECT_NE(HashTokens(a), HashTokens(c));
  EXPECT_EQ(HashTokens(a), HashTokens(std::vector<int32_t>{1, 2, 3}));
  const std::vector<uint64_t> ab = {HashTokens(a), HashTokens(b)};
  const std::vector<uint64_t> ba = {HashTokens(b), HashTokens(a)};
  EXPECT_NE(OutputsDigest(ab), OutputsDigest(ba));
}

TEST(Report, MetricsFromSamples) {
  const RunMetrics m = FakeRun(10);
  EXPECT_EQ(m.output_tokens, 40);
  EXPECT_DOUBLE_EQ(m.throughput, 10.0);
  EXPECT_DOUBLE_EQ(m.latency_s.mean, 2.0);
  EXPECT_DOUBLE_EQ(m.latency_s.p50, 2.0);
  EXPECT_DOUBLE_EQ(m.ttft_s.p50, 0.2);
}

TEST(Report, RatiosAndGeometricMean) {
  const std::vector<RatioRow> rows = BaselineRatios(TwoModeReport());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_DOUBLE_EQ(rows[0].geomean, 1.0);
  ASSERT_EQ(rows[1].ratios.size(), 2u);
  EXPECT_DOUBLE_EQ(rows[1].ratios[0], 2.0);
  EXPECT_DOUBLE_EQ(rows[1].ratios[1], 8.0);  // the median of 70, 80, 90
  EXPECT_DOUBLE_EQ(rows[1].geomean, 4.0);
}

// In an open loop the arrivals set the throughput, so the ratios compare mean latency: the
// baseline's over the mode's, the median of the repeats' means.
TEST(Report, AnOpenLoopComparesMeanLatency) {
  Report r = TwoModeReport();
  r.request_rate = 2.0;
  auto latency = [](double seconds) {
    RunMetrics m = FakeRun(10);
    m.latency_s.mean = seconds;
    return m;
  };
  r.cells[0].runs = {latency(4.0)};
  r.cells[1].runs = {latency(6.0)};
  r.cells[2].runs = {latency(2.0)};
  r.cells[3].runs = {latency(1.0), latency(3.0), latency(2.0)};
  const std::vector<RatioRow> rows = BaselineRatios(r);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_DOUBLE_EQ(rows[1].ratios[0], 2.0);
  EXPECT_DOUBLE_EQ(rows[1].ratios[1], 3.0);
  EXPECT_NE(RenderTable(r).find("open loop, 2 requests/s arriving (Poisson), at most c in flight: "
                                "base's mean latency / the mode's"),
            std::string::npos)
      << RenderTable(r);
}

TEST(Report, MissingCellsHaveNoRatio) {
  Report r = TwoModeReport();
  r.cells[3].runs.clear();
  const std::vector<RatioRow> rows = BaselineRatios(r);
  EXPECT_TRUE(std::isnan(rows[1].ratios[1]));
  EXPECT_DOUBLE_EQ(rows[1].geomean, 2.0);
}

TEST(Report, TableNamesModesRatiosAndNotes) {
  Report r = TwoModeReport();
  r.modes.push_back({.label = "graphs", .note = "n/a on CPU", .measured = false});
  r.cells.push_back({.mode = "graphs", .dataset = "gsm8k", .concurrency = 8});
  const std::string table = RenderTable(r);
  EXPECT_NE(table.find("vs_base"), std::string::npos);
  EXPECT_NE(table.find("8.000x"), std::string::npos);
  EXPECT_NE(table.find("fast: 4.000x"), std::string::npos);
  EXPECT_NE(table.find("note: graphs: n/a on CPU"), std::string::npos);
  EXPECT_NE(table.find("25.0%"), std::string::npos);  // (90 − 70) / 80
}

TEST(Report, AdaptiveModesShowTheirRowsOverTime) {
  // Steps at 0.5 s intervals over 5 s: 8 requests at 64 rows, then 8 at 8 rows (plain).
  std::vector<StepPoint> steps;
  for (int i = 0; i < 10; ++i) {
    steps.push_back({.t = 0.25 + 0.5 * i, .rows = i < 4 ? 64 : 8, .requests = 8});
  }
  const std::vector<BudgetWindow> w = RowsOverTime(steps, 5.0, 5);
  ASSERT_EQ(w.size(), 5u);
  EXPECT_DOUBLE_EQ(w[0].rows_per_step, 64);
  EXPECT_DOUBLE_EQ(w[2].rows_per_step, 8);
  EXPECT_DOUBLE_EQ(w[4].end_s, 5.0);
  EXPECT_TRUE(RowsOverTime(steps, 0.0, 5).empty());

  Report r = TwoModeReport();
  r.modes[1].adaptive = true;
  for (Cell& cell : r.cells) {
    for (RunMetrics& run : cell.runs) run.rows_over_time = w;
  }
  const std::string table = RenderTable(r);
  const size_t at = table.find("verified rows per request per step over the measured window");
  ASSERT_NE(at, std::string::npos);
  EXPECT_NE(table.find("fast            8.00  8.00  1.00  1.00  1.00", at), std::string::npos)
      << table.substr(at);
  EXPECT_EQ(table.find("base  ", at), std::string::npos) << "only adaptive modes";
  const nlohmann::json j = RenderJson(r);
  EXPECT_DOUBLE_EQ(j["cells"][0]["runs"][0]["rows_over_time"][1]["rows_per_step"].get<double>(),
                   64);
}

TEST(Report, CsvHasOneRowPerMeasuredCell) {
  const std::string csv = RenderCsv(TwoModeReport());
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);
  EXPECT_EQ(csv.rfind("mode,dataset,concurrency,repeats,", 0), 0u);
  EXPECT_NE(csv.find("fast,humaneval,8,3,2,40,"), std::string::npos);
}

TEST(Report, JsonCarriesCellsRunsAndGeomeans) {
  const nlohmann::json j = RenderJson(TwoModeReport());
  EXPECT_EQ(j["baseline"], "base");
  ASSERT_EQ(j["cells"].size(), 4u);
  EXPECT_EQ(j["cells"][3]["runs"].size(), 3u);
  EXPECT_DOUBLE_EQ(j["cells"][3]["throughput_tok_s"].get<double>(), 80.0);
  EXPECT_DOUBLE_EQ(j["geomean_ratio_vs_baseline"]["fast"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(j["cells"][0]["runs"][0]["tau"].get<double>(), 2.5);
}

TEST(Report, GnuplotScriptPlotsEveryModePerDataset) {
  const std::string script = GnuplotScript(TwoModeReport(), "/o");
  EXPECT_NE(script.find("set output '/o/throughput.png'"), std::string::npos);
  EXPECT_NE(script.find("'/o/plot_data_humaneval.dat' using 1:4 with linespoints title 'fast'"),
            std::string::npos);
  EXPECT_NE(script.find("set output '/o/latency.png'"), std::string::npos);
  // One concurrency: a range around it (gnuplot's own would be empty, and warn).
  EXPECT_NE(script.find("set xrange [5.65685:11.3137]"), std::string::npos) << script;
}

TEST(Sweep, RunsEveryCellPerRepeatAndChecksTheBaseline) {
  const SweepPlan plan{.modes = {{.label = "a"}, {.label = "b"}, {.label = "c", .runnable = false}},
                       .datasets = {"gsm8k"},
                       .concurrency = {1, 2},
                       .repeats = 3,
                       .requests_per_cell = 5};
  EXPECT_EQ(SweepRequests(plan), 2 * 2 * 3 * 5);
  int calls = 0;
  const CellRunner runner = [&](const BenchMode&, const std::string&, int32_t c,
                                const std::function<void()>&) -> Result<RunMetrics> {
    ++calls;
    return FakeRun(10.0 * c);
  };
  Result<Report> report = RunSweep(plan, "a", runner, nullptr);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(calls, 12);
  ASSERT_EQ(report->cells.size(), 6u);
  EXPECT_EQ(report->cells[1].runs.size(), 3u);
  EXPECT_TRUE(report->cells[5].runs.empty());
  EXPECT_FALSE(RunSweep(plan, "c", runner, nullptr).ok());
}

TEST(Sse, SplitsEventsAcrossArbitraryPieces) {
  const std::string stream =
      ": comment\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata: line1\ndata: line2\n\ndata: [DONE]\n\n";
  for (size_t piece : {size_t{1}, size_t{3}, stream.size()}) {
    SseParser parser;
    std::vector<std::string> events;
    for (size_t i = 0; i < stream.size(); i += piece) parser.Feed(stream.substr(i, piece), &events);
    ASSERT_EQ(events.size(), 3u) << piece;
    EXPECT_EQ(events[0], "{\"a\":1}");
    EXPECT_EQ(events[1], "line1\nline2");
    EXPECT_EQ(events[2], "[DONE]");
  }
}

TEST(Sse, TalliesContentUsageErrorsAndDone) {
  StreamTally t;
  EXPECT_FALSE(TallyChunk(R"({"choices":[{"delta":{"role":"assistant"}}]})", &t));
  EXPECT_TRUE(TallyChunk(R"({"choices":[{"delta":{"content":"Hel"}}]})", &t));
  EXPECT_TRUE(TallyChunk(R"({"choices":[{"delta":{"content":"lo"}}]})", &t));
  EXPECT_FALSE(TallyChunk(R"({"choices":[{"delta":{"content":""}}]})", &t));
  EXPECT_EQ(t.OutputTokens(), 2);
  EXPECT_FALSE(TallyChunk(R"({"choices":[],"usage":{"completion_tokens":5}})", &t));
  EXPECT_EQ(t.OutputTokens(), 5);
  EXPECT_FALSE(t.done);
  TallyChunk("[DONE]", &t);
  EXPECT_TRUE(t.done);
  TallyChunk(R"({"error":{"message":"overloaded"}})", &t);
  EXPECT_EQ(t.error, "overloaded");
  EXPECT_FALSE(TallyChunk("not json", &t));
  // A completion chunk carries its text in choices[0].text.
  StreamTally completion;
  EXPECT_TRUE(TallyChunk(R"({"choices":[{"index":0,"text":"Hi"}]})", &completion));
  EXPECT_FALSE(TallyChunk(R"({"choices":[{"index":0,"text":""}]})", &completion));
  EXPECT_EQ(completion.OutputTokens(), 1);
}

TEST(Sse, RequestBodyAsksForAStreamWithUsage) {
  const nlohmann::json body = nlohmann::json::parse(
      ChatRequestBody({.url = "http://x", .model = "m"}, {.prompt = "p", .max_tokens = 7}));
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["messages"][0]["content"], "p");
  EXPECT_EQ(body["max_tokens"], 7);
  EXPECT_TRUE(body["stream"].get<bool>());
  EXPECT_TRUE(body["stream_options"]["include_usage"].get<bool>());
  EXPECT_EQ(RequestPath({}, {.prompt = "p"}), "/v1/chat/completions");
}

TEST(Sse, TokenIdPromptsGoToCompletions) {
  const ServerTarget target{.url = "http://x", .model = "m"};
  const ChatRequest request{.prompt = "p", .prompt_ids = {1, 2, 3}, .max_tokens = 7};
  const nlohmann::json body = nlohmann::json::parse(ChatRequestBody(target, request));
  EXPECT_EQ(body["prompt"], (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(body.contains("messages"));
  EXPECT_TRUE(body["stream"].get<bool>());
  EXPECT_EQ(RequestPath(target, request), "/v1/completions");
}

}  // namespace
}  // namespace dscale::bench
