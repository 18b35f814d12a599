// none, dflash and fixed:K: the same k for every drafted request, the anchor alone for the others.
#include <gtest/gtest.h>

#include <vector>

#include "plan/fixed_rows_strategy.h"
#include "plan/plain_strategy.h"
#include "plan/whole_block_strategy.h"
#include "strategy_test_util.h"

namespace dscale {
namespace {

using plan_test::DecideAll;
using plan_test::MakeBlocks;

constexpr int32_t kW = 16;

// Three drafted requests and one that verifies its anchor alone.
StrategyInput MixedStep(const StepBatch& blocks, const DraftOutput& drafts,
                        const std::vector<uint8_t>& drafted) {
  return {.blocks = blocks, .drafts = drafts, .drafted = drafted, .drafted_requests = 3};
}

TEST(PlainStrategyTest, VerifiesTheAnchorOnly) {
  const StepBatch blocks = MakeBlocks({1, 1, 1});
  const DraftOutput none;
  PlainStrategy strategy;
  EXPECT_EQ(DecideAll(strategy, {.blocks = blocks, .drafts = none, .drafted_requests = 0}),
            (std::vector<int32_t>{1, 1, 1}));
  EXPECT_DOUBLE_EQ(strategy.CapacityFraction(kW), 1.0 / kW);
}

TEST(WholeBlockStrategyTest, VerifiesEverySpanRow) {
  const StepBatch blocks = MakeBlocks({kW, 1, kW, kW});
  const DraftOutput drafts;
  const std::vector<uint8_t> drafted = {1, 0, 1, 1};
  WholeBlockStrategy strategy(kW);
  EXPECT_EQ(DecideAll(strategy, MixedStep(blocks, drafts, drafted)),
            (std::vector<int32_t>{kW, 1, kW, kW}));
  EXPECT_DOUBLE_EQ(strategy.CapacityFraction(kW), 1.0);
}

TEST(FixedRowsStrategyTest, VerifiesKRowsOrTheShorterSpan) {
  const StepBatch blocks = MakeBlocks({kW, 1, kW, kW});
  const DraftOutput drafts;
  const std::vector<uint8_t> drafted = {1, 0, 1, 1};
  FixedRowsStrategy strategy(4);
  EXPECT_EQ(DecideAll(strategy, MixedStep(blocks, drafts, drafted)),
            (std::vector<int32_t>{4, 1, 4, 4}));
  EXPECT_DOUBLE_EQ(strategy.CapacityFraction(kW), 4.0 / kW);
}

TEST(FixedRowsStrategyTest, KeepsTheDefaultAdmissionAndDrafting) {
  FixedRowsStrategy strategy(2);
  EXPECT_TRUE(strategy.FeedNewRequest());
  EXPECT_EQ(strategy.DraftCount(3, 5, {}), 3);
  EXPECT_FALSE(strategy.DropDraftContexts());
  EXPECT_FALSE(strategy.AutoSnapshot().has_value());
}

}  // namespace
}  // namespace dscale
