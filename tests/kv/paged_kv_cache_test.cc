#include "kv/paged_kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "core/dtype.h"

namespace dscale {
namespace {

KvCacheShape SmallShape(int32_t num_pages, int32_t page_size = 4) {
  return {.num_layers = 2, .kv_heads = 2, .head_dim = 3, .page_size = page_size,
          .num_pages = num_pages};
}

TEST(PageAllocatorTest, HandsOutEveryPageOnceThenRunsOut) {
  PageAllocator allocator(3);
  std::set<int32_t> pages;
  for (int i = 0; i < 3; ++i) pages.insert(allocator.Allocate());
  EXPECT_EQ(pages, (std::set<int32_t>{0, 1, 2}));
  EXPECT_EQ(allocator.Allocate(), -1);
  allocator.Free(1);
  EXPECT_EQ(allocator.free_pages(), 1);
  EXPECT_EQ(allocator.Allocate(), 1);
}

TEST(PageAllocatorDeathTest, DoubleFreeIsABug) {
  PageAllocator allocator(2);
  const int32_t page = allocator.Allocate();
  allocator.Free(page);
  EXPECT_DEATH(allocator.Free(page), "page freed twice");
}

TEST(PagedKvCacheTest, ReserveGrowsByWholePages) {
  PagedKvCache cache(SmallShape(8));
  const int32_t seq = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(seq, 5).ok());
  EXPECT_EQ(cache.Length(seq), 5);
  EXPECT_EQ(cache.PageTable(seq).size(), 2u);
  EXPECT_EQ(cache.free_pages(), 6);
  ASSERT_TRUE(cache.Reserve(seq, 8).ok());  // fits in the reserved pages
  EXPECT_EQ(cache.free_pages(), 6);
  ASSERT_TRUE(cache.Reserve(seq, 3).ok());  // never shrinks
  EXPECT_EQ(cache.Length(seq), 8);
}

TEST(PagedKvCacheTest, SlotsFollowThePageTable) {
  PagedKvCache cache(SmallShape(8));
  const int32_t a = cache.AddSequence();
  const int32_t b = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(a, 4).ok());
  ASSERT_TRUE(cache.Reserve(b, 4).ok());
  ASSERT_TRUE(cache.Reserve(a, 9).ok());  // a's pages interleave with b's
  std::set<int64_t> slots;
  for (int32_t pos = 0; pos < 9; ++pos) {
    const int64_t slot = cache.Slot(a, pos);
    EXPECT_EQ(slot, cache.PageTable(a)[pos / 4] * 4 + pos % 4);
    slots.insert(slot);
  }
  for (int32_t pos = 0; pos < 4; ++pos) slots.insert(cache.Slot(b, pos));
  EXPECT_EQ(slots.size(), 13u) << "two positions share a slot";
}

TEST(PagedKvCacheTest, RunningOutIsAStatusAndChangesNothing) {
  PagedKvCache cache(SmallShape(3));
  const int32_t a = cache.AddSequence();
  const int32_t b = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(a, 8).ok());
  const Status s = cache.Reserve(b, 8);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("2 pages needed, 1 free"), std::string::npos) << s.message();
  EXPECT_EQ(cache.Length(b), 0);
  EXPECT_EQ(cache.free_pages(), 1);
  cache.RemoveSequence(a);
  EXPECT_TRUE(cache.Reserve(b, 8).ok());
}

TEST(PagedKvCacheTest, StoreWritesTheRowAtItsSlot) {
  for (const KvDtype dtype : {KvDtype::kBf16, KvDtype::kF32}) {
    SCOPED_TRACE(KvDtypeName(dtype));
    PagedKvCache cache(SmallShape(4).WithDtype(dtype));
    const int32_t seq = cache.AddSequence();
    ASSERT_TRUE(cache.Reserve(seq, 6).ok());
    const std::vector<float> k = {1, 2, 3, 4, 5, 6};  // exact in BF16 too
    const std::vector<float> v = {-1, -2, -3, -4, -5, -6};
    const int64_t slot = cache.Slot(seq, 5);
    cache.Store(1, slot, k.data(), v.data());
    std::vector<float> k_read(6), v_read(6);
    cache.store().Read(1, slot, k_read.data(), v_read.data());
    EXPECT_EQ(k_read, k);
    EXPECT_EQ(v_read, v);
    cache.store().Read(0, slot, k_read.data(), v_read.data());
    EXPECT_EQ(k_read, std::vector<float>(6, 0.0f)) << "other layers untouched";
    // What attention reads: the pair of the store's dtype, and only that pair.
    const cpu::PagedKvLayer layer = cache.Layer(1);
    ASSERT_EQ(layer.bf16(), dtype == KvDtype::kBf16);
    for (int i = 0; i < 6; ++i) {
      if (layer.bf16()) {
        EXPECT_EQ(layer.k_bf16[slot * 6 + i], F32ToBf16(k[i]));
        EXPECT_EQ(layer.v_bf16[slot * 6 + i], F32ToBf16(v[i]));
        EXPECT_EQ(layer.k, nullptr);
      } else {
        EXPECT_EQ(layer.k[slot * 6 + i], k[i]);
        EXPECT_EQ(layer.v[slot * 6 + i], v[i]);
        EXPECT_EQ(layer.k_bf16, nullptr);
      }
    }
  }
}

// BF16 rows hold each value rounded to nearest even: within 2⁻⁸ relative of it.
TEST(PagedKvCacheTest, Bf16RowsRoundToNearestEven) {
  const KvCacheShape shape{.num_layers = 1, .kv_heads = 1, .head_dim = 6, .num_pages = 1};
  PagedKvCache cache(shape.WithDtype(KvDtype::kBf16));
  const float half = std::ldexp(1.0f, -8);  // half a BF16 ulp at 1
  const float above = std::ldexp(1.0f, -20);
  // Halfway cases go to the even neighbour; just above halfway rounds up.
  const std::vector<float> k = {1 + half, 1 + 3 * half, 1 + half + above, -(1 + half), 3, 0};
  const std::vector<float> want_k = {1, 1 + 4 * half, 1 + 2 * half, -1, 3, 0};
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 10.0f);
  std::vector<float> v(6);
  for (float& x : v) x = normal(rng);
  cache.Store(0, 2, k.data(), v.data());
  std::vector<float> k_read(6), v_read(6);
  cache.store().Read(0, 2, k_read.data(), v_read.data());
  EXPECT_EQ(k_read, want_k);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(v_read[i], Bf16ToF32(F32ToBf16(v[i])));
    EXPECT_LE(std::fabs(v_read[i] - v[i]), std::ldexp(std::fabs(v[i]), -8)) << v[i];
  }
}

TEST(KvDtypeTest, NamesRoundTripAndSizes) {
  for (const KvDtype dtype : {KvDtype::kBf16, KvDtype::kF32}) {
    EXPECT_EQ(KvDtypeFromName(KvDtypeName(dtype)), dtype);
  }
  EXPECT_EQ(KvDtypeName(KvDtype::kBf16), "bf16");
  EXPECT_EQ(KvDtypeSize(KvDtype::kBf16), 2);
  EXPECT_EQ(KvDtypeSize(KvDtype::kF32), 4);
  EXPECT_EQ(KvDtypeFromName("fp16"), std::nullopt);
  EXPECT_EQ(KvCacheShape{}.dtype, KvDtype::kBf16) << "BF16 by default";
}

TEST(PagedKvCacheTest, SequenceIdsAreReusedAndAllPagesReturn) {
  PagedKvCache cache(SmallShape(6));
  std::vector<int32_t> seqs;
  for (int i = 0; i < 3; ++i) {
    seqs.push_back(cache.AddSequence());
    ASSERT_TRUE(cache.Reserve(seqs.back(), 2 * 4).ok());
  }
  EXPECT_EQ(cache.free_pages(), 0);
  cache.RemoveSequence(seqs[1]);
  EXPECT_EQ(cache.AddSequence(), seqs[1]);
  EXPECT_EQ(cache.num_sequences(), 3);
  for (int32_t s : seqs) cache.RemoveSequence(s);
  EXPECT_EQ(cache.free_pages(), 6);
  EXPECT_EQ(cache.num_sequences(), 0);
}

}  // namespace
}  // namespace dscale
