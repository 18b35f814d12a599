// StepStats::Since: what a benchmark's measured window counted, its warm-up taken out.

#include "engine/step_stats.h"

#include <gtest/gtest.h>

namespace dscale {
namespace {

TEST(StepStatsTest, SinceTakesEveryCounterAndStageTimeOutAndKeepsTheLatestStep) {
  StepStats before;
  before.decode_steps = 3;
  before.decode_request_steps = 5;
  before.verified_rows = 7;
  before.committed_tokens = 11;
  before.prefill_rows = 13;
  before.mixed_prefill_rows = 2;
  before.prompt_wait_steps = 6;
  before.prefix_query_tokens = 17;
  before.prefix_hit_tokens = 4;
  before.output_tokens = 19;
  before.accepted_histogram[0] = 23;
  before.accepted_histogram[64] = 1;
  before.prefill_s = 0.5;
  before.draft_s = 0.25;
  before.decision_s = 0.125;
  before.verify_s = 1.5;
  before.acceptance_s = 0.0625;
  before.commit_s = 0.75;
  before.verify_experts_per_layer = 40;
  before.expert_counted_steps = 3;
  before.last_step_requests = 9;
  before.last_step_rows = 9;

  StepStats after = before;
  after.decode_steps += 1;
  after.decode_request_steps += 2;
  after.verified_rows += 6;
  after.committed_tokens += 5;
  after.prefill_rows += 8;
  after.mixed_prefill_rows += 8;
  after.prompt_wait_steps += 2;
  after.prefix_query_tokens += 8;
  after.prefix_hit_tokens += 3;
  after.output_tokens += 5;
  after.accepted_histogram[2] += 2;
  after.prefill_s += 0.5;
  after.draft_s += 0.5;
  after.decision_s += 0.5;
  after.verify_s += 0.5;
  after.acceptance_s += 0.5;
  after.commit_s += 0.5;
  after.verify_experts_per_layer += 12;
  after.expert_counted_steps += 1;
  after.last_step_requests = 2;
  after.last_step_rows = 6;

  const StepStats d = after.Since(before);
  EXPECT_EQ(d.decode_steps, 1);
  EXPECT_EQ(d.decode_request_steps, 2);
  EXPECT_EQ(d.verified_rows, 6);
  EXPECT_EQ(d.committed_tokens, 5);
  EXPECT_EQ(d.prefill_rows, 8);
  EXPECT_EQ(d.mixed_prefill_rows, 8);
  EXPECT_EQ(d.prompt_wait_steps, 2);
  EXPECT_EQ(d.prefix_query_tokens, 8);
  EXPECT_EQ(d.prefix_hit_tokens, 3);
  EXPECT_EQ(d.output_tokens, 5);
  for (size_t i = 0; i < d.accepted_histogram.size(); ++i) {
    EXPECT_EQ(d.accepted_histogram[i], i == 2 ? 2 : 0) << "accepted " << i;
  }
  for (const double s :
       {d.prefill_s, d.draft_s, d.decision_s, d.verify_s, d.acceptance_s, d.commit_s}) {
    EXPECT_EQ(s, 0.5);
  }
  EXPECT_EQ(d.verify_experts_per_layer, 12);
  EXPECT_EQ(d.expert_counted_steps, 1);
  EXPECT_EQ(d.last_step_requests, 2);
  EXPECT_EQ(d.last_step_rows, 6);
  EXPECT_DOUBLE_EQ(d.tau(), 2.5);
}

}  // namespace
}  // namespace dscale
