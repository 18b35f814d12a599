#include "dvl/flat_pack.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "dvl/budget_allocator.h"

namespace dscale::dvl {
namespace {

constexpr int kW = kBlockWidth;

// A step's draft blocks with recognisable values: request i is sequence 7 + i at context
// 100 + 10·i (so row j sits at position 100 + 10·i + j), token 1000·i + j, KV slot 5000 + 16·i + j.
struct Blocks {
  StepBatch batch;
  std::vector<int32_t> k;
  int64_t n = 0;
  std::vector<int32_t> page_table = {3, 1, 4, 1, 5, 9, 2, 6};
};

Blocks MakeBlocks(int64_t n, std::mt19937& rng) {
  Blocks b;
  b.n = n;
  for (int64_t i = 0; i < n; ++i) {
    b.batch.BeginSpan(static_cast<int32_t>(7 + i), static_cast<int32_t>(100 + 10 * i),
                      b.page_table.data());
    for (int j = 0; j < kW; ++j) {
      b.batch.AddRow(static_cast<int32_t>(1000 * i + j), static_cast<int32_t>(5000 + kW * i + j),
                     /*logits=*/false);
    }
  }
  // Lengths from the allocator at the default budget 8N, from random probabilities.
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> probs(static_cast<size_t>(n) * (kW - 1));
  for (float& p : probs) p = unit(rng);
  Result<Allocation> a = AllocateFromProbs(probs.data(), n, BudgetFromFraction(n, kW, 0.5).value());
  DSCALE_CHECK(a.ok());
  b.k = a->k;
  return b;
}

// Checks rows, spans, offsets, sentinels and tail of a packed bucket against `b`.
void ExpectPacked(const Blocks& b, const BucketStep& ws) {
  const int64_t n = b.n;
  const StepBatch& step = ws.batch();
  int32_t offset = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(ws.offsets()[i], offset) << "request " << i;
    ASSERT_EQ(ws.k()[i], b.k[i]);
    const StepSpan& span = step.spans()[i];
    EXPECT_EQ(span.q_start, offset);
    EXPECT_EQ(span.q_len, b.k[i]);
    EXPECT_EQ(span.ctx_len, 100 + 10 * i);
    EXPECT_EQ(span.seq, 7 + i);
    EXPECT_EQ(span.page_table, b.page_table.data());
    EXPECT_EQ(span.always_kept, b.k[i] == 1);  // the request's next token alone
    for (int j = 0; j < b.k[i]; ++j) {
      const size_t s = static_cast<size_t>(offset + j);
      ASSERT_EQ(step.tokens()[s], 1000 * i + j);
      ASSERT_EQ(step.positions()[s], 100 + 10 * i + j);
      ASSERT_EQ(step.kv_slots()[s], 5000 + kW * i + j);
      ASSERT_EQ(step.owners()[s], i);
      ASSERT_EQ(step.logit_rows()[s], static_cast<int32_t>(s));
    }
    offset += b.k[i];
  }
  const int32_t live_rows = offset;
  EXPECT_EQ(step.rows(), live_rows);
  EXPECT_EQ(step.num_spans(), n);
  EXPECT_EQ(step.logit_rows().size(), static_cast<size_t>(live_rows));
  EXPECT_EQ(ws.offsets()[n], live_rows);
  for (int64_t i = n; i < ws.bucket(); ++i) {
    EXPECT_EQ(ws.k()[i], 0) << "sentinel " << i;
    EXPECT_EQ(ws.offsets()[i + 1], live_rows) << "sentinel " << i;
    EXPECT_EQ(step.span_storage()[i].q_len, 0) << "sentinel " << i;
    EXPECT_EQ(step.span_storage()[i].q_start, live_rows) << "sentinel " << i;
  }
  for (int64_t s = live_rows; s < ws.capacity(); ++s) {
    EXPECT_EQ(step.token_storage()[s], 0) << "tail row " << s;
    EXPECT_EQ(step.position_storage()[s], 0) << "tail row " << s;
    EXPECT_EQ(step.kv_slot_storage()[s], b.batch.kv_slots()[0]) << "tail row " << s;
  }
}

TEST(FlatPackTest, SelectsSmallestCoveringBucket) {
  const BucketConfig config;
  const std::vector<std::pair<int64_t, int32_t>> cases = {
      {1, 1}, {2, 2}, {3, 4}, {5, 8}, {8, 8}, {9, 12}, {32, 32}, {33, 40}, {64, 64}};
  for (const auto& [n, bucket] : cases) {
    EXPECT_EQ(SelectBucket(config.buckets, n).value(), bucket) << "N = " << n;
    EXPECT_EQ(BucketCapacity(config, bucket), 8 * bucket);
  }
  Result<int32_t> over = SelectBucket(config.buckets, 65);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("largest bucket (64)"), std::string::npos);
  EXPECT_FALSE(SelectBucket(config.buckets, 0).ok());
}

TEST(FlatPackTest, PacksEveryBucketBoundary) {
  std::mt19937 rng(11);
  WorkspacePool pool{BucketConfig{}};
  for (int64_t n : {1, 2, 3, 5, 8, 9, 32, 33, 64}) {
    SCOPED_TRACE("N = " + std::to_string(n));
    const Blocks b = MakeBlocks(n, rng);
    Result<BucketStep*> ws = pool.ForLiveCount(n);
    ASSERT_TRUE(ws.ok());
    ASSERT_TRUE(Pack(b.batch, b.k, *ws).ok());
    EXPECT_EQ((*ws)->batch().rows(), 8 * n);  // Σk = M_live = W·N/2
    ExpectPacked(b, **ws);
  }
}

TEST(FlatPackTest, SteadyStateReusesFixedAddresses) {
  std::mt19937 rng(3);
  WorkspacePool pool{BucketConfig{}};
  BucketStep* first = pool.ForLiveCount(12).value();
  const int32_t* tokens = first->batch().tokens().data();
  const int32_t* positions = first->batch().positions().data();
  const int32_t* kv = first->batch().kv_slots().data();
  const StepSpan* spans = first->batch().spans().data();
  const int32_t* k = first->k().data();
  const int32_t* offsets = first->offsets().data();
  // N = 9..12 all run in bucket 12; a smaller N after a larger one must rewrite the tail.
  for (int64_t n : {12, 9, 11, 10, 12, 9}) {
    const Blocks b = MakeBlocks(n, rng);
    BucketStep* ws = pool.ForLiveCount(n).value();
    ASSERT_EQ(ws, first);
    ASSERT_TRUE(Pack(b.batch, b.k, ws).ok());
    ExpectPacked(b, *ws);
    EXPECT_EQ(ws->batch().tokens().data(), tokens);
    EXPECT_EQ(ws->batch().positions().data(), positions);
    EXPECT_EQ(ws->batch().kv_slots().data(), kv);
    EXPECT_EQ(ws->batch().spans().data(), spans);
    EXPECT_EQ(ws->k().data(), k);
    EXPECT_EQ(ws->offsets().data(), offsets);
    EXPECT_EQ(ws->capacity(), 96);
  }
  EXPECT_EQ(pool.created(), 1);
  pool.CreateAll();
  EXPECT_EQ(pool.created(), 14);
  EXPECT_EQ(pool.ForLiveCount(10).value(), first);
}

TEST(FlatPackTest, AllocateAndPackMatchesAllocateThenPack) {
  std::mt19937 rng(8);
  std::normal_distribution<float> normal(1.0f, 2.0f);
  WorkspacePool pool{BucketConfig{}};
  BucketStep* ws = pool.ForLiveCount(20).value();
  const float* scores = ws->scores().data();
  for (int64_t n : {20, 17, 19}) {
    Blocks b = MakeBlocks(n, rng);
    std::vector<float> logits(static_cast<size_t>(n) * (kW - 1));
    for (float& z : logits) z = normal(rng);
    const Allocation want = AllocateFromLogits(logits.data(), n, 8 * n).value();
    Result<int64_t> updates = AllocateAndPack(logits.data(), 8 * n, b.batch, ws);
    ASSERT_TRUE(updates.ok()) << updates.status().ToString();
    EXPECT_EQ(*updates, want.updates);
    b.k = want.k;
    ExpectPacked(b, *ws);
    EXPECT_TRUE(std::equal(want.seed.begin(), want.seed.end(), ws->seed().begin()));
    EXPECT_EQ(ws->scores().data(), scores);
  }
  Blocks b = MakeBlocks(20, rng);
  const std::vector<float> logits(20 * (kW - 1), 0.0f);
  EXPECT_FALSE(AllocateAndPack(logits.data(), 161, b.batch, ws).ok());  // > capacity 160
  EXPECT_FALSE(AllocateAndPack(logits.data(), 19, b.batch, ws).ok());   // < N
  b.batch.BeginSpan(99, 0, b.page_table.data());                        // a block shorter than W
  b.batch.AddRow(1, 1, false);
  EXPECT_FALSE(AllocateAndPack(logits.data(), 8 * 21, b.batch, ws).ok());
}

TEST(FlatPackTest, RejectsInvalidInput) {
  std::mt19937 rng(5);
  BucketStep ws(4, 32);
  Blocks b = MakeBlocks(3, rng);
  b.k = {16, 16, 1};  // Σk = 33 > 32
  EXPECT_FALSE(Pack(b.batch, b.k, &ws).ok());
  b.k = {0, 8, 8};
  EXPECT_FALSE(Pack(b.batch, b.k, &ws).ok());
  b.k = {17, 1, 1};
  EXPECT_FALSE(Pack(b.batch, b.k, &ws).ok());
  b.k = {8, 8};  // one length per block
  EXPECT_FALSE(Pack(b.batch, b.k, &ws).ok());
  b.batch.BeginSpan(99, 0, b.page_table.data());  // an anchor-only block
  b.batch.AddRow(1, 1, false);
  b.k = {8, 8, 8, 2};
  Status past_block = Pack(b.batch, b.k, &ws);
  ASSERT_FALSE(past_block.ok());
  EXPECT_NE(past_block.message().find("outside [1, 1]"), std::string::npos);
  b.k = {8, 8, 8, 1};
  ASSERT_TRUE(Pack(b.batch, b.k, &ws).ok());
  EXPECT_EQ(ws.batch().rows(), 25);
  const Blocks five = MakeBlocks(5, rng);
  Status too_many = Pack(five.batch, five.k, &ws);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.message().find("bucket 4"), std::string::npos);
}

TEST(FlatPackTest, CustomBucketsAndFraction) {
  BucketConfig config{.buckets = {3, 6}, .verify_budget = 0.25};
  ASSERT_TRUE(config.Validate().ok());
  EXPECT_EQ(BucketCapacity(config, 6), 24);
  WorkspacePool pool(config);
  BucketStep* ws = pool.ForLiveCount(4).value();
  EXPECT_EQ(ws->bucket(), 6);
  EXPECT_EQ(ws->capacity(), 24);
  EXPECT_FALSE(pool.ForLiveCount(7).ok());

  EXPECT_FALSE((BucketConfig{.buckets = {}}).Validate().ok());
  EXPECT_FALSE((BucketConfig{.buckets = {4, 2}}).Validate().ok());
  EXPECT_FALSE((BucketConfig{.buckets = {0, 2}}).Validate().ok());
  EXPECT_FALSE((BucketConfig{.verify_budget = 0.0}).Validate().ok());
}

}  // namespace
}  // namespace dscale::dvl
