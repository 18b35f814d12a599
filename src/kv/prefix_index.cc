#include "kv/prefix_index.h"

#include <algorithm>

#include "core/check.h"

namespace dscale {
namespace {

uint64_t Mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 31);
}

}  // namespace

PrefixIndex::PrefixIndex(int32_t num_pages, int32_t page_size)
    : page_size_(page_size), pages_(static_cast<size_t>(num_pages)) {}

uint64_t PrefixIndex::Key(uint64_t parent_id, std::span<const int32_t> tokens) const {
  uint64_t h = Mix(0, parent_id);
  for (const int32_t t : tokens) h = Mix(h, static_cast<uint32_t>(t));
  return h;
}

bool PrefixIndex::ParentId(int32_t parent, uint64_t* id) const {
  if (parent < 0) {
    *id = 0;
    return true;
  }
  *id = pages_[parent].id;
  return pages_[parent].published;
}

bool PrefixIndex::Publish(int32_t page, int32_t parent, std::span<const int32_t> tokens,
                          bool draft_rows) {
  DSCALE_CHECK(static_cast<int32_t>(tokens.size()) == page_size_);
  uint64_t parent_id = 0;
  Page& p = pages_[page];
  if (p.published || !ParentId(parent, &parent_id) || Find(parent, tokens) >= 0) return false;
  p = Page{.published = true,
           .draft_rows = draft_rows,
           .id = next_id_++,
           .parent_id = parent_id,
           .key = Key(parent_id, tokens),
           .tokens = {tokens.begin(), tokens.end()}};
  by_key_.emplace(p.key, page);
  return true;
}

int32_t PrefixIndex::Find(int32_t parent, std::span<const int32_t> tokens) const {
  uint64_t parent_id = 0;
  if (!ParentId(parent, &parent_id)) return -1;
  const auto [first, last] = by_key_.equal_range(Key(parent_id, tokens));
  for (auto it = first; it != last; ++it) {
    const Page& p = pages_[it->second];
    if (p.parent_id == parent_id && std::equal(tokens.begin(), tokens.end(), p.tokens.begin())) {
      return it->second;
    }
  }
  return -1;
}

void PrefixIndex::Release(int32_t page) {
  Page& p = pages_[page];
  DSCALE_CHECK(p.published && !p.evictable);
  p.evictable = true;
  p.lru = lru_.insert(lru_.end(), page);
}

void PrefixIndex::Acquire(int32_t page) {
  Page& p = pages_[page];
  if (!p.evictable) return;
  lru_.erase(p.lru);
  p.evictable = false;
}

int32_t PrefixIndex::EvictOldest() {
  if (lru_.empty()) return -1;
  const int32_t page = lru_.front();
  lru_.pop_front();
  Page& p = pages_[page];
  const auto [first, last] = by_key_.equal_range(p.key);
  for (auto it = first; it != last; ++it) {
    if (it->second == page) {
      by_key_.erase(it);
      break;
    }
  }
  p = Page{};
  return page;
}

}  // namespace dscale
