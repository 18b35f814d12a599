#include "core/step_batch.h"

#include <gtest/gtest.h>

#include <vector>

namespace dscale {
namespace {

// A decode step's verify rows (every row with logits), then a prompt chunk (its last row's).
TEST(StepBatchTest, AppendPlacesTheOtherBatchsRowsSpansAndLogitRowsAfterThisOnes) {
  const std::vector<int32_t> pages_a = {4}, pages_b = {7, 9}, pages_c = {2};
  StepBatch verify;
  verify.BeginSpan(/*seq=*/0, /*ctx_len=*/5, pages_a.data());
  verify.AddRow(11, 40, true);
  verify.AddRow(12, 41, true);
  verify.BeginSpan(/*seq=*/3, /*ctx_len=*/9, pages_b.data());
  verify.AddRow(13, 77, true);
  verify.tile_rows = 16;

  StepBatch prompt;
  prompt.BeginSpan(/*seq=*/5, /*ctx_len=*/0, pages_c.data(), SpanRows::kAlwaysKept);
  for (int32_t r = 0; r < 3; ++r) prompt.AddRow(20 + r, 16 + r, /*logits=*/r == 2);
  prompt.tile_rows = 128;

  StepBatch mixed(1, 1);  // small: Append grows it
  mixed.Append(verify);
  mixed.Append(prompt);
  EXPECT_EQ(mixed.rows(), 6);
  EXPECT_EQ(mixed.num_spans(), 3);
  EXPECT_EQ(mixed.tile_rows, 128);  // the batch's own: Append copies rows only
  EXPECT_EQ(std::vector<int32_t>(mixed.tokens().begin(), mixed.tokens().end()),
            (std::vector<int32_t>{11, 12, 13, 20, 21, 22}));
  EXPECT_EQ(std::vector<int32_t>(mixed.positions().begin(), mixed.positions().end()),
            (std::vector<int32_t>{5, 6, 9, 0, 1, 2}));
  EXPECT_EQ(std::vector<int32_t>(mixed.kv_slots().begin(), mixed.kv_slots().end()),
            (std::vector<int32_t>{40, 41, 77, 16, 17, 18}));
  EXPECT_EQ(std::vector<int32_t>(mixed.owners().begin(), mixed.owners().end()),
            (std::vector<int32_t>{0, 0, 1, 2, 2, 2}));
  EXPECT_EQ(std::vector<int32_t>(mixed.logit_rows().begin(), mixed.logit_rows().end()),
            (std::vector<int32_t>{0, 1, 2, 5}));
  const StepSpan& last = mixed.spans()[2];
  EXPECT_EQ(last.q_start, 3);
  EXPECT_EQ(last.q_len, 3);
  EXPECT_EQ(last.ctx_len, 0);
  EXPECT_EQ(last.seq, 5);
  EXPECT_EQ(last.page_table, pages_c.data());
  EXPECT_TRUE(last.always_kept);
  EXPECT_FALSE(mixed.spans()[0].always_kept);
  EXPECT_EQ(mixed.spans()[1].q_start, 2);
  EXPECT_EQ(mixed.MaxQueryLen(), 3);
}

}  // namespace
}  // namespace dscale
