// The logit rules against a plain reference that recounts every token's history for every row
// and applies the documented formula to each of the vocabulary's logits in turn: the same float
// operations, each rounded (neither side fuses a product into a sum), so the bits must match.

#include "spec/logit_rules.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

namespace dscale {
namespace {

// Rows [k, vocab] after the rules, token by token: row j follows prompt, output and
// drafts[0, j).
std::vector<float> Reference(const LogitRules& rules, const std::vector<int32_t>& prompt,
                             const std::vector<int32_t>& output, const std::vector<int32_t>& drafts,
                             std::vector<float> rows, int64_t vocab) {
  const auto k = static_cast<int64_t>(rows.size()) / vocab;
  for (int64_t j = 0; j < k; ++j) {
    std::vector<int32_t> before = output;
    before.insert(before.end(), drafts.begin(), drafts.begin() + j);
    for (int32_t t = 0; t < vocab; ++t) {
      float x = rows[j * vocab + t];
      for (const auto& [token, bias] : rules.logit_bias) {
        if (token == t) x += bias;
      }
      const auto count = static_cast<int32_t>(std::ranges::count(before, t));
      const bool in_prompt = std::ranges::find(prompt, t) != prompt.end();
      if ((in_prompt || count > 0) && rules.repetition_penalty != 1.0f) {
        x = x > 0.0f ? x / rules.repetition_penalty : x * rules.repetition_penalty;
      }
      if (count > 0) {
        const float by_count = static_cast<float>(count) * rules.frequency_penalty;
        x -= by_count + rules.presence_penalty;
      }
      rows[j * vocab + t] = x;
    }
  }
  return rows;
}

std::vector<int32_t> RandomTokens(std::mt19937& rng, int n, int32_t vocab) {
  std::uniform_int_distribution<int32_t> token(0, vocab - 1);
  std::vector<int32_t> out(n);
  for (int32_t& t : out) t = token(rng);
  return out;
}

TEST(LogitRulesTest, EveryRowMatchesTheReferenceBitForBit) {
  constexpr int32_t kVocab = 37;  // small, so tokens recur in the prompt, output and drafts
  std::mt19937 rng(7);
  std::normal_distribution<float> logit(0.0f, 3.0f);
  const LogitRules cases[] = {
      {.logit_bias = {{0, 5.0f}, {13, -100.0f}, {36, 0.25f}}},
      {.presence_penalty = 0.7f},
      {.frequency_penalty = 0.3f},
      {.presence_penalty = -1.5f, .frequency_penalty = 2.0f},
      {.repetition_penalty = 1.3f},
      {.repetition_penalty = 0.6f},
      {.logit_bias = {{2, 1.0f}, {3, -2.0f}},
       .presence_penalty = 0.4f,
       .frequency_penalty = -0.9f,
       .repetition_penalty = 1.7f},
  };
  for (const LogitRules& rules : cases) {
    for (const int rows : {1, 2, 7}) {
      for (const int output_len : {0, 1, 19}) {
        const std::vector<int32_t> prompt = RandomTokens(rng, 11, kVocab);
        const std::vector<int32_t> output = RandomTokens(rng, output_len, kVocab);
        const std::vector<int32_t> drafts = RandomTokens(rng, rows - 1, kVocab);
        std::vector<float> logits(static_cast<size_t>(rows) * kVocab);
        for (float& x : logits) x = logit(rng);
        const std::vector<float> expected =
            Reference(rules, prompt, output, drafts, logits, kVocab);
        ApplyLogitRules(rules, prompt, output, drafts, logits, kVocab);
        for (size_t i = 0; i < logits.size(); ++i) {
          ASSERT_EQ(logits[i], expected[i])
              << "row " << i / kVocab << " token " << i % kVocab << " of " << rows << " rows, "
              << output_len << " output tokens, case " << (&rules - cases);
        }
      }
    }
  }
}

TEST(LogitRulesTest, ARowSeesTheDraftsBeforeItAsOutput) {
  // Row 1 after draft 4 is row 0 of the same request once 4 has been output.
  const LogitRules rules{.presence_penalty = 1.0f, .frequency_penalty = 0.5f};
  const std::vector<int32_t> prompt = {1, 2}, output = {4, 3};
  std::vector<float> block(2 * 6, 1.0f);
  ApplyLogitRules(rules, prompt, output, std::vector<int32_t>{4}, block, 6);
  std::vector<float> later(6, 1.0f);
  ApplyLogitRules(rules, prompt, std::vector<int32_t>{4, 3, 4}, {}, later, 6);
  EXPECT_EQ(std::vector<float>(block.begin() + 6, block.end()), later);
  EXPECT_EQ(later[4], 1.0f - (2 * 0.5f + 1.0f));  // twice in the output
  EXPECT_EQ(later[3], 1.0f - (0.5f + 1.0f));
  EXPECT_EQ(later[1], 1.0f);  // in the prompt only: no presence or frequency penalty
}

TEST(LogitRulesTest, RepetitionCountsThePromptOnceAndShrinksEitherSign) {
  const LogitRules rules{.repetition_penalty = 2.0f};
  const std::vector<int32_t> prompt = {0, 0, 1}, output = {1};
  std::vector<float> row = {3.0f, -3.0f, 3.0f};
  ApplyLogitRules(rules, prompt, output, {}, row, 3);
  EXPECT_EQ(row, (std::vector<float>{1.5f, -6.0f, 3.0f}));
}

TEST(LogitRulesTest, StopIdsAreHeldBackUntilTheOutputHoldsMinTokens) {
  // Rows follow 2, 3 and 4 output tokens; min_tokens 4 holds the stops back in the first two.
  const LogitRules rules{.min_tokens = 4};
  const std::vector<int64_t> stops = {1, 3, 99};  // 99: outside the vocabulary, skipped
  std::vector<float> rows(3 * 5, 2.0f);
  HoldBackStopIds(rules, 2, stops, rows, 5);
  const float low = std::numeric_limits<float>::lowest();
  EXPECT_EQ(rows, (std::vector<float>{2, low, 2, low, 2, 2, low, 2, low, 2, 2, 2, 2, 2, 2}));
}

// A budget of 4 with 2 output tokens: the row after the drafts' first two (4 tokens in all) keeps
// only the closing token, unless one of the 4 closed the block already; other rows are free.
TEST(LogitRulesTest, AReasoningBudgetClosesTheBlockAtItsRow) {
  const LogitRules rules{.reasoning_budget = 4, .reasoning_close_token = 3};
  const float low = std::numeric_limits<float>::lowest();
  const auto rows_after = [&](std::vector<int32_t> output, std::vector<int32_t> drafts) {
    std::vector<float> rows(4 * 5);
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i % 5) - 1.0f;
    CloseReasoningAtBudget(rules, output, drafts, rows, 5);
    return rows;
  };
  const std::vector<float> free = {-1, 0, 1, 2, 3};
  std::vector<float> want;
  for (const auto& row : {free, free, std::vector<float>{low, low, low, 2, low}, free}) {
    want.insert(want.end(), row.begin(), row.end());
  }
  EXPECT_EQ(rows_after({0, 1}, {2, 4, 0}), want);
  // Closed already, in the output or in a draft before the row: nothing is forced.
  std::vector<float> untouched;
  for (int r = 0; r < 4; ++r) untouched.insert(untouched.end(), free.begin(), free.end());
  EXPECT_EQ(rows_after({3, 1}, {2, 4, 0}), untouched);
  EXPECT_EQ(rows_after({0, 1}, {3, 4, 0}), untouched);
  // Past the budget (the block closed at its row) and off: nothing.
  EXPECT_EQ(rows_after({0, 1, 2, 3, 4}, {2, 4, 0}), untouched);
  std::vector<float> off(4 * 5, 1.0f);
  CloseReasoningAtBudget({}, std::vector<int32_t>{0, 1}, std::vector<int32_t>{2, 4, 0}, off, 5);
  EXPECT_EQ(off, std::vector<float>(4 * 5, 1.0f));
}

TEST(LogitRulesTest, ChecksNameTheField) {
  EXPECT_TRUE(CheckLogitRules({}, 10, 16).ok());
  EXPECT_TRUE(CheckLogitRules({.logit_bias = {{0, -100.0f}, {9, 100.0f}},
                               .presence_penalty = -2.0f,
                               .frequency_penalty = 2.0f,
                               .repetition_penalty = 0.1f},
                              10, 16)
                  .ok());
  const auto message = [](const LogitRules& rules) {
    return CheckLogitRules(rules, 10, 16).message();
  };
  EXPECT_TRUE(message({.logit_bias = {{10, 1.0f}}}).starts_with("logit_bias: token 10 is not"));
  EXPECT_TRUE(message({.logit_bias = {{-1, 1.0f}}}).starts_with("logit_bias: token -1 is not"));
  EXPECT_TRUE(message({.logit_bias = {{3, 1.0f}, {3, 2.0f}}}).starts_with("logit_bias: tokens"));
  EXPECT_TRUE(message({.reasoning_budget = 5}).starts_with("thinking_token_budget: "));
  EXPECT_TRUE(CheckLogitRules({.reasoning_budget = 0, .reasoning_close_token = 9}, 10, 16).ok());
  EXPECT_TRUE(
      message({.logit_bias = {{3, 100.5f}}}).starts_with("logit_bias: the bias of token 3"));
  EXPECT_TRUE(message({.presence_penalty = 2.5f}).starts_with("presence_penalty: "));
  EXPECT_TRUE(message({.frequency_penalty = -3.0f}).starts_with("frequency_penalty: "));
  EXPECT_TRUE(message({.repetition_penalty = 0.0f}).starts_with("repetition_penalty: "));
  EXPECT_TRUE(message({.repetition_penalty = 0.005f}).starts_with("repetition_penalty: "));
  EXPECT_TRUE(message({.repetition_penalty = 101.0f}).starts_with("repetition_penalty: "));
  EXPECT_TRUE(CheckLogitRules({.repetition_penalty = 0.01f}, 10, 16).ok());
  EXPECT_TRUE(CheckLogitRules({.repetition_penalty = 100.0f}, 10, 16).ok());
  EXPECT_TRUE(message({.min_tokens = 17}).starts_with("min_tokens: "));
  EXPECT_TRUE(message({.min_tokens = -1}).starts_with("min_tokens: "));
  EXPECT_TRUE(CheckLogitRules({.min_tokens = 16}, 10, 16).ok());
  LogitRules many;
  for (int32_t t = 0; t <= kMaxLogitBiasTokens; ++t) many.logit_bias.emplace_back(t, 1.0f);
  EXPECT_TRUE(CheckLogitRules(many, 1 << 20, 16).message().starts_with("logit_bias: at most"));
}

}  // namespace
}  // namespace dscale
