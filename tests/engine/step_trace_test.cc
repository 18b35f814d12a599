// The step trace (engine/step_trace.h): one JSON line per decode step whose counts add up to the
// engine's own counters, the auto budget's state on every line under --verify-budget auto, and
// an error naming the path it cannot create.

#include "engine/step_trace.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "budget/verify_budget.h"
#include "engine_test_util.h"

namespace dscale {
namespace {

using testing::EngineRun;
using testing::RandomPrompts;
using testing::RunPrompts;

std::string TracePath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("dscale_step_trace_" + std::to_string(::getpid()) + "_" + name + ".jsonl"))
      .string();
}

std::vector<nlohmann::json> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  for (std::string text; std::getline(in, text);) {
    lines.push_back(nlohmann::json::parse(text));  // throws (fails the test) on a bad line
  }
  return lines;
}

TEST(StepTraceJsonTest, WritesTheStagesInMillisecondsAndOnlyTheSectionsThatApply) {
  StepTraceLine line{.step = 3,
                     .requests = 2,
                     .fed = 2,
                     .drafted = 1,
                     .rows = 9,
                     .committed = 5,
                     .seconds = {.draft = 0.0125, .verify = 0.25}};
  EXPECT_EQ(StepTraceJson(line, 1500.04),
            "{\"step\": 3, \"t_ms\": 1500.0, \"requests\": 2, \"fed\": 2, \"drafted\": 1, "
            "\"rows\": 9, \"committed\": 5, \"prompt_rows\": 0, \"draft_ms\": 12.500, "
            "\"decide_ms\": 0.000, \"verify_ms\": 250.000, \"accept_ms\": 0.000, "
            "\"commit_ms\": 0.000, \"feed_ms\": 0.000}");
  line.experts_per_layer = 12.5;
  line.auto_budget = budget::AutoBudgetSnapshot{.mode = budget::AutoMode::kPlain,
                                                .last_best_rows = 12,
                                                .last_verify_predicted_s = 0.2,
                                                .last_tokens_predicted = 6.5,
                                                .gain = 0.9,
                                                .step_gain = 0.85,
                                                .explore_loss_s = 0.5,
                                                .explore_budget_s = 1.25};
  const nlohmann::json parsed = nlohmann::json::parse(StepTraceJson(line, 0));
  EXPECT_EQ(parsed["experts"], 12.5);
  EXPECT_EQ(parsed["auto"]["mode"], "plain");
  EXPECT_EQ(parsed["auto"]["cold_start"], false);
  EXPECT_EQ(parsed["auto"]["step_gain"], 0.85);
  EXPECT_EQ(parsed["auto"]["gain"], 0.9);
  EXPECT_EQ(parsed["auto"]["loss_s"], 0.5);
  EXPECT_EQ(parsed["auto"]["budget_s"], 1.25);
  EXPECT_EQ(parsed["auto"]["calibration"], 1.0);
  // The controller's predictions are the step's own only where it drafted.
  EXPECT_EQ(parsed["auto"]["best_rows"], 12);
  EXPECT_EQ(parsed["auto"]["verify_predicted_ms"], 200.0);
  EXPECT_EQ(parsed["auto"]["committed_predicted"], 6.5);
  line.drafted = 0;
  const nlohmann::json plain = nlohmann::json::parse(StepTraceJson(line, 0));
  EXPECT_FALSE(plain["auto"].contains("best_rows"));
  EXPECT_FALSE(plain["auto"].contains("verify_predicted_ms"));
}

TEST(StepTraceOpenTest, NamesTheFlagAndThePathItCannotCreate) {
  const std::string path = "/nonexistent-dscale-dir/trace.jsonl";
  const Result<std::unique_ptr<StepTrace>> trace = StepTrace::Open(path);
  ASSERT_FALSE(trace.ok());
  EXPECT_NE(trace.status().message().find("--step-trace " + path), std::string::npos)
      << trace.status().message();
}

class StepTraceEngineTest : public testing::EngineFixture {};

TEST_F(StepTraceEngineTest, OneLinePerDecodeStepAddingUpToTheEngineCounters) {
  const auto prompts = RandomPrompts(12, target_.config().vocab_size, 31, 30);
  std::unique_ptr<DFlashDrafter> drafter = testing::RandomDrafter(target_, 9);
  const std::string path = TracePath("auto");
  {
    Result<std::unique_ptr<StepTrace>> trace = StepTrace::Open(path);
    ASSERT_TRUE(trace.ok()) << trace.status().ToString();
    const EngineConfig config{
        .policy = LengthPolicy::Parse("dscale").value(),
        .max_running = 4,
        .inputs = {.predictor = &predictor_,
                   .verify_budget = budget::VerifyBudget::Parse("auto").value()},
        .step_trace = trace->get()};
    const EngineRun run = RunPrompts(target_, drafter.get(), config, prompts, {.max_tokens = 20});
    const std::vector<nlohmann::json> lines = ReadLines(path);
    ASSERT_EQ(static_cast<int64_t>(lines.size()), run.stats.decode_steps);
    int64_t rows = 0, committed = 0, request_steps = 0;
    double t_ms = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
      const nlohmann::json& l = lines[i];
      EXPECT_EQ(l["step"], static_cast<int64_t>(i));
      EXPECT_GE(l["t_ms"].get<double>(), t_ms);
      t_ms = l["t_ms"].get<double>();
      const int64_t requests = l["requests"];
      EXPECT_GE(requests, 1);
      EXPECT_LE(requests, 4);
      EXPECT_LE(l["drafted"].get<int64_t>(), l["fed"].get<int64_t>());
      EXPECT_LE(l["fed"].get<int64_t>(), requests);
      EXPECT_GE(l["rows"].get<int64_t>(), requests);
      EXPECT_GE(l["committed"].get<int64_t>(), requests);
      EXPECT_LE(l["committed"].get<int64_t>(), l["rows"].get<int64_t>());
      ASSERT_TRUE(l.contains("auto"));
      EXPECT_GE(l["auto"]["budget_s"].get<double>(), 0);
      EXPECT_FALSE(l.contains("experts"));  // a dense target
      rows += l["rows"].get<int64_t>();
      committed += l["committed"].get<int64_t>();
      request_steps += requests;
    }
    EXPECT_EQ(rows, run.stats.verified_rows);
    EXPECT_EQ(committed, run.stats.committed_tokens);
    EXPECT_EQ(request_steps, run.stats.decode_request_steps);
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace dscale
