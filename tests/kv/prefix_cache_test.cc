// Prefix caching in the paged KV cache: published pages are found by their token prefix, shared
// with reference counts, kept after their sequences end, and evicted least recently released
// first only when a page is needed and none is free.

#include <gtest/gtest.h>

#include <vector>

#include "kv/paged_kv_cache.h"
#include "kv/prefix_index.h"

namespace dscale {
namespace {

constexpr int32_t kPage = 4;

KvCacheShape Shape(int32_t num_pages) {
  return {
      .num_layers = 1, .kv_heads = 1, .head_dim = 2, .page_size = kPage, .num_pages = num_pages};
}

std::vector<int32_t> Tokens(int32_t n, int32_t first = 100) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

TEST(PrefixCacheTest, PublishedPagesMatchTheirWholePrefixOnly) {
  PagedKvCache cache(Shape(8));
  cache.EnablePrefixCache();
  const std::vector<int32_t> tokens = Tokens(10);  // two full pages and a partial one
  const int32_t a = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(a, 10).ok());
  EXPECT_TRUE(cache.MatchPrefix(tokens, 8, false).empty());
  cache.PublishPrefix(a, tokens, /*draft_rows=*/true);
  EXPECT_EQ(cache.MatchPrefix(tokens, 8, true),
            (std::vector<int32_t>{cache.PageTable(a)[0], cache.PageTable(a)[1]}));
  EXPECT_EQ(cache.MatchPrefix(tokens, 1, true).size(), 1u);  // the caller's bound
  // The second page's tokens after a different first page: no match past the first difference.
  std::vector<int32_t> other = tokens;
  other[1] = 7;
  EXPECT_TRUE(cache.MatchPrefix(other, 8, false).empty());
  other = tokens;
  other[5] = 7;
  EXPECT_EQ(cache.MatchPrefix(other, 8, false).size(), 1u);
  // The same tokens as a first page elsewhere: the page's parent is part of its key.
  const std::vector<int32_t> second_page(tokens.begin() + kPage, tokens.begin() + 2 * kPage);
  EXPECT_TRUE(cache.MatchPrefix(second_page, 8, false).empty());
}

TEST(PrefixCacheTest, DraftRowsAreRequiredOnlyWhenAskedFor) {
  PagedKvCache cache(Shape(4));
  cache.EnablePrefixCache();
  const int32_t a = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(a, 8).ok());
  cache.PublishPrefix(a, Tokens(8), /*draft_rows=*/false);
  EXPECT_EQ(cache.MatchPrefix(Tokens(8), 2, false).size(), 2u);
  EXPECT_TRUE(cache.MatchPrefix(Tokens(8), 2, true).empty());
}

TEST(PrefixCacheTest, SharedPagesOutliveTheirSequencesAndAreEvictedOldestFirst) {
  PagedKvCache cache(Shape(4));
  cache.EnablePrefixCache();
  const int32_t a = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(a, 8).ok());
  cache.PublishPrefix(a, Tokens(8), false);
  const std::vector<int32_t> pages = cache.PageTable(a);
  // b shares both pages and adds one of its own.
  const std::vector<int32_t> shared = cache.MatchPrefix(Tokens(8), 2, false);
  const int32_t b = cache.AddSequence(shared);
  EXPECT_EQ(cache.Length(b), 8);
  ASSERT_TRUE(cache.Reserve(b, 12).ok());
  EXPECT_EQ(cache.free_pages(), 1);
  cache.RemoveSequence(a);  // b still holds the shared pages
  EXPECT_EQ(cache.free_pages(), 1);
  cache.RemoveSequence(b);  // published pages stay cached and count as free
  EXPECT_EQ(cache.free_pages(), 4);
  EXPECT_EQ(cache.MatchPrefix(Tokens(8), 2, false), pages);
  // Needing every page evicts the cached ones; then nothing matches.
  const int32_t c = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(c, 16).ok());
  EXPECT_EQ(cache.free_pages(), 0);
  EXPECT_TRUE(cache.MatchPrefix(Tokens(8), 2, false).empty());
  cache.RemoveSequence(c);
  EXPECT_EQ(cache.free_pages(), 4);
}

TEST(PrefixCacheTest, FreePagesSharingDiscountsTheCachedPagesTaken) {
  PagedKvCache cache(Shape(4));
  cache.EnablePrefixCache();
  const int32_t a = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(a, 8).ok());
  cache.PublishPrefix(a, Tokens(8), false);
  cache.RemoveSequence(a);
  const std::vector<int32_t> shared = cache.MatchPrefix(Tokens(8), 2, false);
  EXPECT_EQ(cache.free_pages(), 4);
  EXPECT_EQ(cache.FreePagesSharing(shared), 2);
}

TEST(PrefixIndexTest, AnEvictedParentsChildrenNeverMatchItsNextContents) {
  PrefixIndex index(4, 2);
  ASSERT_TRUE(index.Publish(0, -1, std::vector<int32_t>{1, 2}, false));
  ASSERT_TRUE(index.Publish(1, 0, std::vector<int32_t>{3, 4}, false));
  EXPECT_FALSE(index.Publish(2, -1, std::vector<int32_t>{1, 2}, false));  // held by page 0
  index.Release(0);
  EXPECT_EQ(index.EvictOldest(), 0);
  // Page 0 comes back holding other tokens: page 1 no longer stands for anything after it.
  ASSERT_TRUE(index.Publish(0, -1, std::vector<int32_t>{9, 9}, false));
  EXPECT_EQ(index.Find(0, std::vector<int32_t>{3, 4}), -1);
  EXPECT_EQ(index.Find(-1, std::vector<int32_t>{9, 9}), 0);
}

TEST(PrefixCacheTest, WithoutPrefixCachingNothingIsKept) {
  PagedKvCache cache(Shape(2));
  const int32_t a = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(a, 8).ok());
  cache.PublishPrefix(a, Tokens(8), false);
  EXPECT_TRUE(cache.MatchPrefix(Tokens(8), 2, false).empty());
  cache.RemoveSequence(a);
  EXPECT_EQ(cache.free_pages(), 2);
}

}  // namespace
}  // namespace dscale
