// Prefix caching in the paged KV cache: published pages are found by their token prefix, shared
// with reference counts, kept after their sequences end, and evicted least recently released
// first only when a page is needed and none is free; a hybrid target's pages share only up to one
// that carries the recurrent state after it.

#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <vector>

#include "kv/paged_kv_cache.h"
#include "kv/prefix_index.h"
#include "kv/recurrent_snapshots.h"

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

// A hybrid's cache: model layer 0 a linear-attention layer (a state of 2 conv and 3 delta
// values), layer 1 an attention layer.
KvCacheShape HybridShape(int32_t num_pages) {
  KvCacheShape shape = Shape(num_pages);
  shape.attention_index = {-1, 0};
  shape.recurrent = {
      .linear_index = {0, -1}, .conv_values = 2, .delta_values = 3, .input_values = 1};
  return shape;
}

// `seq` advanced by `rows` positions to a state of five values from `first` on.
void Advance(PagedKvCache& cache, int32_t seq, int32_t rows, float first) {
  RecurrentStates& states = cache.recurrent();
  states.BeginSpan(seq, rows, /*in_place=*/false);
  float* working = states.WorkingConv(seq, 0);
  for (int i = 0; i < 5; ++i) working[i] = first + static_cast<float>(i);
  states.AdoptWorking(seq);
}

// Keeps `seq`'s committed state after `tokens`.
void Keep(PagedKvCache& cache, int32_t seq, const std::vector<int32_t>& tokens) {
  cache.KeepRecurrentState(seq, tokens, cache.recurrent().Committed(seq));
}

std::vector<float> Committed(PagedKvCache& cache, int32_t seq) {
  const std::span<const float> state = cache.recurrent().Committed(seq);
  return {state.begin(), state.end()};
}

TEST(HybridPrefixCacheTest, ASequenceResumesOnlyAfterAPageCarryingItsState) {
  PagedKvCache cache(HybridShape(8));
  cache.EnablePrefixCache(/*recurrent_states=*/4);
  const int32_t a = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(a, 10).ok());
  Advance(cache, a, 8, 1.0f);
  // Kept before its pages are published: it waits for them.
  Keep(cache, a, Tokens(8));
  const std::vector<float> at_eight = Committed(cache, a);
  Advance(cache, a, 2, 50.0f);
  cache.PublishPrefix(a, Tokens(10), false);
  const std::vector<int32_t> pages = cache.MatchPrefix(Tokens(10), 2, false);
  ASSERT_EQ(pages.size(), 2u);
  EXPECT_EQ(cache.ResumablePages(pages), 2);
  EXPECT_EQ(cache.ResumablePages(std::span(pages).first(1)), 0);  // no state after page one
  // b resumes after both pages with a's state there, not a's state now.
  const int32_t b = cache.AddSequence(pages);
  EXPECT_EQ(cache.recurrent().position(b), 8);
  EXPECT_EQ(Committed(cache, b), at_eight);
  // Kept where a published page stands already: carried at once.
  const int32_t c = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(c, 4).ok());
  Advance(cache, c, 4, 7.0f);
  Keep(cache, c, Tokens(4));
  EXPECT_EQ(cache.ResumablePages(std::span(pages).first(1)), 1);
  const int32_t d = cache.AddSequence(std::span(pages).first(1));
  EXPECT_EQ(cache.recurrent().position(d), 4);
  EXPECT_EQ(Committed(cache, d), Committed(cache, c));
}

TEST(HybridPrefixCacheTest, StatesGoLeastRecentlyUsedFirstAndWithTheirPages) {
  PagedKvCache cache(HybridShape(4));
  cache.EnablePrefixCache(/*recurrent_states=*/1);
  const int32_t a = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(a, 8).ok());
  Advance(cache, a, 4, 1.0f);
  Keep(cache, a, Tokens(4));
  Advance(cache, a, 4, 2.0f);
  Keep(cache, a, Tokens(8));  // both copies wait for their pages
  cache.PublishPrefix(a, Tokens(8), false);
  const std::vector<int32_t> pages = cache.MatchPrefix(Tokens(8), 2, false);
  // Room for one: the later copy carried last stays.
  EXPECT_EQ(cache.ResumablePages(pages), 2);
  EXPECT_EQ(cache.ResumablePages(std::span(pages).first(1)), 0);
  // One state at most: keeping another drops the older.
  const int32_t b = cache.AddSequence(pages);  // resumes after 8 positions
  ASSERT_TRUE(cache.Reserve(b, 12).ok());
  Advance(cache, b, 4, 3.0f);
  cache.PublishPrefix(b, Tokens(12), false);
  Keep(cache, b, Tokens(12));
  const std::vector<int32_t> three = cache.MatchPrefix(Tokens(12), 3, false);
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(cache.ResumablePages(three), 3);
  EXPECT_EQ(cache.ResumablePages(std::span(three).first(2)), 0);
  // The page evicted for another sequence's room takes its state along.
  cache.RemoveSequence(a);
  cache.RemoveSequence(b);
  const int32_t c = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(c, 16).ok());
  EXPECT_TRUE(cache.MatchPrefix(Tokens(12), 3, false).empty());
  cache.RemoveSequence(c);
  const int32_t d = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(d, 12).ok());
  cache.PublishPrefix(d, Tokens(12, 500), false);
  EXPECT_EQ(cache.ResumablePages(cache.MatchPrefix(Tokens(12, 500), 3, false)), 0);
}

TEST(RecurrentSnapshotsTest, KeepsAtMostItsCapacityLeastRecentlyUsedFirst) {
  RecurrentSnapshots snapshots(2);
  const std::vector<float> one = {1.0f}, two = {2.0f}, three = {3.0f};
  snapshots.Put(5, one);
  snapshots.Put(6, two);
  EXPECT_EQ(snapshots.Use(5)[0], 1.0f);  // 6 is now the least recently used
  snapshots.Put(7, three);
  EXPECT_TRUE(snapshots.Has(5));
  EXPECT_FALSE(snapshots.Has(6));
  EXPECT_TRUE(snapshots.Has(7));
  snapshots.Put(5, three);  // the same prefix: kept as it was
  EXPECT_EQ(snapshots.Use(5)[0], 1.0f);
  snapshots.Drop(5);
  EXPECT_EQ(snapshots.size(), 1);
  RecurrentSnapshots none(0);
  none.Put(1, one);
  EXPECT_FALSE(none.Has(1));
}

}  // namespace
}  // namespace dscale
