#include "plan/make_length_strategy.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "plan/auto_budget_strategy.h"
#include "plan/dscale_strategy.h"
#include "plan/dspark_strategy.h"
#include "plan/fixed_rows_strategy.h"
#include "plan/plain_strategy.h"
#include "plan/whole_block_strategy.h"
#include "strategy_test_util.h"

namespace dscale {
namespace {

LengthPolicy Policy(const std::string& text) { return LengthPolicy::Parse(text).value(); }

std::string ErrorOf(const PlannerConfig& config) {
  const Result<std::unique_ptr<LengthStrategy>> made = MakeLengthStrategy(config);
  return made.ok() ? "ok" : made.status().message();
}

TEST(MakeLengthStrategyTest, OneStrategyPerPolicy) {
  const dvl::Predictor predictor = plan_test::MakePredictor(1);
  const budget::SpsTable sps{.tokens = {1}, .steps_per_second = {10}};
  auto made = [&](const std::string& spec, bool automatic) {
    PlannerConfig config{.policy = Policy(spec),
                         .block = 16,
                         .inputs = {.predictor = &predictor, .sps_table = &sps}};
    config.inputs.verify_budget.automatic = automatic;
    return std::move(MakeLengthStrategy(config).value());
  };
  EXPECT_NE(dynamic_cast<PlainStrategy*>(made("none", false).get()), nullptr);
  EXPECT_NE(dynamic_cast<WholeBlockStrategy*>(made("dflash", false).get()), nullptr);
  EXPECT_NE(dynamic_cast<FixedRowsStrategy*>(made("fixed:4", false).get()), nullptr);
  EXPECT_NE(dynamic_cast<DScaleStrategy*>(made("dscale", false).get()), nullptr);
  EXPECT_NE(dynamic_cast<AutoBudgetStrategy*>(made("dscale", true).get()), nullptr);
  EXPECT_NE(dynamic_cast<DSparkStrategy*>(made("dspark", false).get()), nullptr);
  // The candidates each reads of a block of 16 (the drafter scores only those): fixed:K its K − 1,
  // every policy whose k or features come from the drafts all 15.
  for (const auto& [spec, automatic, read] : {std::tuple{"fixed:4", false, 3},
                                              {"fixed:2", false, 1},
                                              {"fixed:16", false, 15},
                                              {"none", false, 15},
                                              {"dflash", false, 15},
                                              {"dscale", false, 15},
                                              {"dscale", true, 15},
                                              {"dspark", false, 15}}) {
    EXPECT_EQ(made(spec, automatic)->CandidatesRead(15), read) << spec;
  }
}

TEST(MakeLengthStrategyTest, RefusesMissingInputs) {
  const dvl::Predictor predictor = plan_test::MakePredictor(1);
  EXPECT_EQ(ErrorOf({.policy = Policy("dscale"), .block = 16}), "--spec dscale needs --predictor");
  EXPECT_EQ(ErrorOf({.policy = Policy("dspark"), .block = 8, .inputs = {.predictor = &predictor}}),
            "--spec dspark needs a drafter with block size 16, got 8");
  EXPECT_EQ(ErrorOf({.policy = Policy("dspark"), .block = 16, .inputs = {.predictor = &predictor}}),
            "--spec dspark needs a steps-per-second table (profiled at start-up, or "
            "--sps-table FILE)");
  EXPECT_EQ(ErrorOf({.policy = Policy("dflash"), .block = 16, .max_running = 0}),
            "max_running: must be at least 1");
  // Every policy but none needs a drafter (block 0: none), and fixed:K one of at least K rows.
  for (const char* spec : {"dflash", "fixed:4", "dscale", "dspark"}) {
    EXPECT_EQ(ErrorOf({.policy = Policy(spec), .inputs = {.predictor = &predictor}}),
              std::string("--spec ") + spec + " needs --drafter");
  }
  EXPECT_EQ(ErrorOf({.policy = Policy("fixed:12"), .block = 8}),
            "--spec fixed:12: the drafter's block has only 8 rows");
  EXPECT_TRUE(CheckPolicyInputs({.policy = Policy("fixed:8"), .block = 8}).ok());
  EXPECT_TRUE(CheckPolicyInputs({.policy = Policy("none")}).ok());
}

// dspark over a drafter with a confidence head (DSpark's) ranks by the head: no predictor and any
// block; the table is still needed. dscale still needs the predictor whatever the drafter has.
TEST(MakeLengthStrategyTest, DSparkOverAConfidenceHeadNeedsNoPredictor) {
  const budget::SpsTable sps{.tokens = {1}, .steps_per_second = {10}};
  const PlannerConfig dspark{.policy = Policy("dspark"),
                             .block = 8,
                             .drafter_confidence = true,
                             .inputs = {.sps_table = &sps}};
  EXPECT_EQ(ErrorOf(dspark), "ok");
  PlannerConfig no_table = dspark;
  no_table.inputs.sps_table = nullptr;
  EXPECT_EQ(ErrorOf(no_table),
            "--spec dspark needs a steps-per-second table (profiled at start-up, or "
            "--sps-table FILE)");
  EXPECT_EQ(ErrorOf({.policy = Policy("dscale"), .block = 16, .drafter_confidence = true}),
            "--spec dscale needs --predictor");
}

}  // namespace
}  // namespace dscale
