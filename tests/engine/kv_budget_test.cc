#include "engine/kv_budget.h"

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine_test_util.h"

namespace dscale {
namespace {

TEST(KvBudgetTest, BytesPerPositionCountKAndVOfEveryLayerInTheCacheDtype) {
  const KvCacheShape shape{.num_layers = 28, .kv_heads = 8, .head_dim = 128};
  EXPECT_EQ(KvBytesPerPosition(shape), 2 * 28 * 8 * 128 * 2) << "BF16 by default";
  EXPECT_EQ(KvBytesPerPosition(shape.WithDtype(KvDtype::kF32)), 2 * 28 * 8 * 128 * 4);
}

// The engine's budget counts the drafter's rows too, in the same dtype.
TEST(KvBudgetTest, TargetAndDrafterRowsHalveWithBf16) {
  const DecoderConfig config = testing::EngineTestTargetConfig();
  const DecoderModel target(config, RandomDecoderWeights(config, 1, DType::kF32));
  const std::unique_ptr<DFlashDrafter> drafter = testing::RandomDrafter(target, 2);
  const int64_t f32 = KvBytesPerPosition(target, drafter.get(), KvDtype::kF32);
  const int64_t draft_layers = drafter->config().draft.num_hidden_layers;
  EXPECT_EQ(f32, (config.num_hidden_layers + draft_layers) * 2 * config.num_key_value_heads *
                     config.head_dim * 4);
  EXPECT_EQ(KvBytesPerPosition(target, drafter.get(), KvDtype::kBf16), f32 / 2);
  EXPECT_EQ(KvBytesPerPosition(target, nullptr, KvDtype::kBf16),
            KvBytesPerPosition(target.KvShape(1, 1)));
}

TEST(KvBudgetTest, DemandCoversEveryRequestRoundedToPages) {
  // 3 + 10 + 16 − 2 = 27 positions → 2 pages of 16 per request.
  EXPECT_EQ(KvTokensForDemand(4, 3, 10, 16, 16), 4 * 32);
  // Without a drafter (block 1) the last output never needs a row: 16 + 1 − 1 = 16.
  EXPECT_EQ(KvTokensForDemand(1, 16, 1, 1, 16), 16);
  EXPECT_EQ(KvTokensForDemand(1, 16, 2, 1, 16), 32);
}

// A request of prompt + max_tokens = a full context fits a cache sized for one full context by
// KvPositionsForRequest, and MaxRequestTokensForKv inverts it.
TEST(KvBudgetTest, PositionsPerRequestAndTheirInverse) {
  // The last decode step anchors at prompt + max_tokens − 2 and stages block − 1 more.
  EXPECT_EQ(KvPositionsForRequest(4095, 1, 16, 16), 4096 + 16);  // 4110 → 257 pages
  EXPECT_EQ(KvPositionsForRequest(4095, 1, 1, 16), 4096);        // 4095 → 256 pages
  EXPECT_EQ(KvPositionsForRequest(4094, 2, 2, 16), 4096);
  EXPECT_EQ(KvPositionsForRequest(7, 1, 1, 1), 7);  // ends at its first token: the prompt only
  EXPECT_EQ(KvPositionsForRequest(0, 5, 16, 16), 32);
  for (const int32_t block : {1, 2, 4, 16}) {
    for (const int64_t cache : {int64_t{16}, int64_t{64}, int64_t{4096}, int64_t{4112}}) {
      const int64_t most = MaxRequestTokensForKv(cache, block);
      // The largest request fits, one token more does not (page rounding aside: cache is
      // whole pages of 1 here).
      EXPECT_LE(KvPositionsForRequest(most - 1, 1, block, 1), cache) << block << " " << cache;
      EXPECT_GT(KvPositionsForRequest(most, 1, block, 1), cache) << block << " " << cache;
    }
  }
}

TEST(KvBudgetTest, PositionsThatFitAreAFractionOfTheMemoryGiven) {
  EXPECT_EQ(KvTokensThatFitIn(int64_t{3} << 30, 1 << 20, 0.5), 1536);
  EXPECT_EQ(KvTokensThatFitIn(1000, 7, 1.0), 142);  // whole positions only
  EXPECT_EQ(KvTokensThatFitIn(1000, 0, 0.5), int64_t{1} << 40);
}

TEST(KvBudgetTest, AvailableMemoryIsRead) {
  const Result<int64_t> available = AvailableMemoryBytes();
  ASSERT_TRUE(available.ok()) << available.status().message();
  EXPECT_GT(*available, 0);
  const Result<int64_t> fit = KvTokensThatFit(1 << 20, 0.5);
  ASSERT_TRUE(fit.ok());
  // Memory is live (other processes, tests running beside this one): the two reads agree
  // within a GiB, half of which is 512 positions of a MiB.
  EXPECT_NEAR(static_cast<double>(*fit), static_cast<double>(*available >> 21), 512.0);
}

TEST(KvBudgetTest, ACacheLargerThanMemoryIsAClearError) {
  EXPECT_TRUE(CheckKvFitsInMemory(1024, 1024).ok());
  const Status s = CheckKvFitsInMemory(int64_t{1} << 40, 1 << 20);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("KV cache of 1099511627776 positions × 1048576 bytes"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("--kv-tokens"), std::string::npos) << s.message();
}

TEST(KvBudgetTest, RecurrentStatesCountBesideTheKvCache) {
  // Each running request's state and its working copy, and the prefix cache's.
  EXPECT_EQ(RecurrentStateBytes(1000, 16, 4), 1000 * (2 * 16 + 4));
  EXPECT_EQ(RecurrentStateBytes(0, 16, 4), 0);  // a target without linear-attention layers
  EXPECT_EQ(KvTokensThatFitIn(int64_t{3} << 30, 1 << 20, 0.5, int64_t{512} << 20), 1024);
  EXPECT_EQ(KvTokensThatFitIn(1000, 7, 1.0, 2000), 0);  // the states alone exceed the room
  EXPECT_TRUE(CheckKvFitsInMemory(1024, 1024, 1 << 20).ok());
  const Status s = CheckKvFitsInMemory(1024, 1024, int64_t{1} << 50);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("+ 1048576.00 GiB of recurrent states"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("--prefix-cache-states"), std::string::npos) << s.message();
}

TEST(KvBudgetTest, EngineRefusesACacheThatCannotFit) {
  const DecoderConfig config = testing::EngineTestTargetConfig();
  DecoderModel target(config, RandomDecoderWeights(config, 1, DType::kF32));
  // 3 layers × 2 KV heads × 16 × K and V × 2 bytes (BF16) = 384 bytes a position: 2^34
  // positions are 6 TiB, more than any machine this runs on (f32: 768 bytes, 12 TiB).
  const auto engine = Engine::Create(target, nullptr, {.kv_tokens = int64_t{1} << 34});
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(engine.status().message().find("× 384 bytes"), std::string::npos)
      << engine.status().message();
  const auto f32 =
      Engine::Create(target, nullptr, {.kv_tokens = int64_t{1} << 34, .kv_dtype = KvDtype::kF32});
  ASSERT_FALSE(f32.ok());
  EXPECT_NE(f32.status().message().find("× 768 bytes"), std::string::npos)
      << f32.status().message();
  const auto zero = Engine::Create(target, nullptr, {.kv_tokens = 0});
  EXPECT_NE(zero.status().message().find("kv_tokens"), std::string::npos);
}

}  // namespace
}  // namespace dscale
