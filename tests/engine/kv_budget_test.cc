#include "engine/kv_budget.h"

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine_test_util.h"

namespace dscale {
namespace {

TEST(KvBudgetTest, BytesPerPositionCountKAndVOfEveryLayer) {
  const KvCacheShape shape{.num_layers = 28, .kv_heads = 8, .head_dim = 128};
  EXPECT_EQ(KvBytesPerPosition(shape), 2 * 28 * 8 * 128 * 4);
}

TEST(KvBudgetTest, DemandCoversEveryRequestRoundedToPages) {
  // 3 + 10 + 16 = 29 positions → 2 pages of 16 per request.
  EXPECT_EQ(KvTokensForDemand(4, 3, 10, 16, 16), 4 * 32);
  EXPECT_EQ(KvTokensForDemand(1, 16, 0, 0, 16), 16);
  EXPECT_EQ(KvTokensForDemand(1, 16, 1, 0, 16), 32);
}

TEST(KvBudgetTest, AvailableMemoryIsRead) {
  const Result<int64_t> available = AvailableMemoryBytes();
  ASSERT_TRUE(available.ok()) << available.status().message();
  EXPECT_GT(*available, 0);
  const Result<int64_t> fit = KvTokensThatFit(1 << 20, 0.5);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(*fit, static_cast<int64_t>(*available * 0.5) >> 20);
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

TEST(KvBudgetTest, EngineRefusesACacheThatCannotFit) {
  const Qwen3Config config = testing::EngineTestTargetConfig();
  Qwen3Model target(config, RandomQwen3Weights(config, 1, DType::kF32));
  // 3 layers × 2 KV heads × 16 × K and V × 4 bytes = 768 bytes a position: 2^34 positions
  // are 12 TiB, more than any machine this runs on.
  const auto engine = Engine::Create(target, nullptr, {.kv_tokens = int64_t{1} << 34});
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(engine.status().message().find("× 768 bytes"), std::string::npos)
      << engine.status().message();
  const auto zero = Engine::Create(target, nullptr, {.kv_tokens = 0});
  EXPECT_NE(zero.status().message().find("kv_tokens"), std::string::npos);
}

}  // namespace
}  // namespace dscale
