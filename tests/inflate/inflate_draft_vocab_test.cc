// The drafter's reduced vocabulary carried to the inflated pair: the source subset's ids, then
// pad ids in the source's proportion of the vocabulary, sorted and valid for the large target.

#include "inflate/inflate_draft_vocab.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/tiny_models.h"

namespace dscale {
namespace {

TEST(InflateDraftVocabTest, KeepsTheSourceIdsAndAddsPadIdsInProportion) {
  DecoderConfig t = testing::OddTinyConfig();  // vocabulary 131
  InflateShape shape = *NamedInflateShape("qwen3-0.6b");
  Result<InflatePlan> plan = PlanInflation(t, testing::TestDrafterConfig(t), shape);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const int64_t large_v = plan->large_target.vocab_size;
  DraftVocab small{.target_vocab_size = 131, .token_ids = {}};
  for (int32_t id = 0; id < 131; id += 3) small.token_ids.push_back(id);  // 44 ids
  const DraftVocab large = InflateDraftVocab(small, *plan);
  EXPECT_EQ(large.target_vocab_size, large_v);
  EXPECT_TRUE(ValidateDraftVocabIds(large.token_ids, large_v, "inflated").ok());
  const auto expected = static_cast<int64_t>(std::llround(44.0 * double(large_v) / 131.0));
  ASSERT_EQ(large.size(), expected);
  for (size_t i = 0; i < small.token_ids.size(); ++i) {
    EXPECT_EQ(plan->vocab[static_cast<size_t>(large.token_ids[i])], small.token_ids[i]) << i;
  }
  for (size_t i = small.token_ids.size(); i < large.token_ids.size(); ++i) {
    ASSERT_LT(plan->vocab[static_cast<size_t>(large.token_ids[i])], 0) << "a pad id: " << i;
  }
}

}  // namespace
}  // namespace dscale
