#pragma once
// Automatic prefix caching: full KV pages kept for reuse, keyed by the tokens they hold and the
// publication of the page that holds the tokens before them, so a page stands for its whole
// token prefix (a publication id, never reused, rather than the parent's page id: an evicted
// parent's page may come back holding other tokens, and its old children must not match then). A
// request whose prompt starts with published pages' tokens shares those pages instead of computing
// their rows again (PagedKvCache::MatchPrefix). Pages are published only once every row in them
// is written and final; a published page no sequence holds waits in least-recently-released
// order and is evicted only when a page is needed and none is free.
//
// Lookups compare the tokens and the parent page exactly (the hash only finds candidates), so a
// collision never shares a wrong page. Not thread-safe (owned by the engine thread).

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

namespace dscale {

class PrefixIndex {
 public:
  PrefixIndex(int32_t num_pages, int32_t page_size);

  // Publishes `page` as holding `tokens` (page_size of them) after the published page `parent`
  // (−1: the sequence's first page); `draft_rows`: the drafter's context rows at its slots are
  // written too. False (and no change) when the page is published already, the parent is not,
  // or another page holds the same tokens after the same parent.
  bool Publish(int32_t page, int32_t parent, std::span<const int32_t> tokens, bool draft_rows);
  // The published page holding `tokens` after the published page `parent` (−1: first), or −1.
  int32_t Find(int32_t parent, std::span<const int32_t> tokens) const;
  bool published(int32_t page) const { return pages_[page].published; }
  bool draft_rows(int32_t page) const { return pages_[page].draft_rows; }

  // A published page no sequence holds any more: evictable from now on, most recent last.
  void Release(int32_t page);
  // A sequence takes a released page again: no longer evictable.
  void Acquire(int32_t page);
  bool evictable(int32_t page) const { return pages_[page].evictable; }
  int32_t evictable_count() const { return static_cast<int32_t>(lru_.size()); }
  // Unpublishes the least recently released page and returns it (−1 when none is evictable).
  int32_t EvictOldest();

 private:
  struct Page {
    bool published = false;
    bool draft_rows = false;
    bool evictable = false;
    uint64_t id = 0;         // this publication's id (0: not published)
    uint64_t parent_id = 0;  // the parent page's publication id (0: the first page)
    uint64_t key = 0;
    std::vector<int32_t> tokens;
    std::list<int32_t>::iterator lru;
  };
  uint64_t Key(uint64_t parent_id, std::span<const int32_t> tokens) const;
  // *id = the publication id of `parent` (−1: 0); false when `parent` is not published.
  bool ParentId(int32_t parent, uint64_t* id) const;

  int32_t page_size_;
  std::vector<Page> pages_;
  std::unordered_multimap<uint64_t, int32_t> by_key_;
  std::list<int32_t> lru_;  // evictable pages, least recently released first
  uint64_t next_id_ = 1;
};

}  // namespace dscale
