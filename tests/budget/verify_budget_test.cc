#include "budget/verify_budget.h"

#include <gtest/gtest.h>

namespace dscale::budget {
namespace {

TEST(VerifyBudgetTest, ParsesAutoAndFractions) {
  EXPECT_TRUE(VerifyBudget::Parse("auto")->automatic);
  EXPECT_EQ(VerifyBudget::Parse("auto")->Name(), "auto");
  EXPECT_TRUE(VerifyBudget::Parse("auto")->price_experts);
  // auto-rows: a mixture of experts' rows priced by their count alone.
  EXPECT_TRUE(VerifyBudget::Parse("auto-rows")->automatic);
  EXPECT_FALSE(VerifyBudget::Parse("auto-rows")->price_experts);
  EXPECT_EQ(VerifyBudget::Parse("auto-rows")->Name(), "auto-rows");
  EXPECT_DOUBLE_EQ(VerifyBudget::Parse("0.5")->fraction, 0.5);
  EXPECT_FALSE(VerifyBudget::Parse("0.5")->automatic);
  EXPECT_EQ(VerifyBudget::Parse("0.25")->Name(), "0.25");
  EXPECT_DOUBLE_EQ(VerifyBudget::Parse("1")->fraction, 1.0);
}

// The message says what the value may be and what it was; the flag (or --modes entry) it came
// from is named by the caller (ModelCommandsTest.BadInputExitsWithAClearMessage, Modes tests).
TEST(VerifyBudgetTest, RejectsOtherValuesSayingWhatItTakes) {
  for (const char* bad : {"0", "-0.5", "1.5", "half", "", "0.5x", "nan", "AUTO", "auto-experts"}) {
    const Result<VerifyBudget> r = VerifyBudget::Parse(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(), std::string("expected auto, auto-rows or a fraction of W·N in "
                                                "(0, 1], got \"") +
                                        bad + "\"")
        << bad;
  }
}

}  // namespace
}  // namespace dscale::budget
