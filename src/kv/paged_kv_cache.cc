#include "kv/paged_kv_cache.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <string>

#include "core/dtype.h"
#include "kernels/cpu/gemm_bf16.h"

namespace dscale {
namespace {

uint64_t NextCacheId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// `n` f32 values into `dst` as `dtype` (BF16: rounded to nearest even).
void StoreRow(const float* src, int64_t n, KvDtype dtype, std::byte* dst) {
  if (dtype == KvDtype::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  cpu::RoundToBf16(src, n, reinterpret_cast<uint16_t*>(dst));
}

// `n` values stored as `dtype` at `src`, as f32.
void ReadRow(const std::byte* src, int64_t n, KvDtype dtype, float* dst) {
  if (dtype == KvDtype::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  const auto* in = reinterpret_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToF32(in[i]);
}

}  // namespace

PageAllocator::PageAllocator(int32_t num_pages) : total_(num_pages), allocated_(num_pages, 0) {
  DSCALE_CHECK(num_pages >= 0);
  free_.reserve(num_pages);
  for (int32_t page = num_pages - 1; page >= 0; --page) free_.push_back(page);
}

int32_t PageAllocator::Allocate() {
  if (free_.empty()) return -1;
  const int32_t page = free_.back();
  free_.pop_back();
  allocated_[page] = 1;
  return page;
}

void PageAllocator::Free(int32_t page) {
  DSCALE_CHECK(page >= 0 && page < total_);
  DSCALE_CHECK_MSG(allocated_[page], "page freed twice");
  allocated_[page] = 0;
  free_.push_back(page);
}

KvStore::KvStore(int32_t num_layers, int32_t kv_heads, int32_t head_dim, int64_t num_slots,
                 int32_t page_size, KvDtype dtype, std::vector<int32_t> layer_index)
    : row_elements_(static_cast<int64_t>(kv_heads) * head_dim),
      num_slots_(num_slots),
      page_size_(page_size),
      dtype_(dtype),
      layer_index_(std::move(layer_index)) {
  DSCALE_CHECK(num_layers >= 0 && kv_heads > 0 && head_dim > 0 && num_slots > 0 && page_size > 0);
  const int64_t bytes = num_slots * row_elements_ * KvDtypeSize(dtype);
  for (int32_t layer = 0; layer < num_layers; ++layer) {
    k_.emplace_back(bytes);
    v_.emplace_back(bytes);
  }
}

size_t KvStore::Place(int32_t layer) const {
  int32_t place = layer;
  if (!layer_index_.empty()) {
    DSCALE_CHECK(layer >= 0 && layer < static_cast<int32_t>(layer_index_.size()));
    place = layer_index_[static_cast<size_t>(layer)];
  }
  DSCALE_CHECK_MSG(place >= 0 && place < num_layers(), "the layer keeps no K/V");
  return static_cast<size_t>(place);
}

void KvStore::Store(int32_t layer, int32_t slot, const float* k, const float* v) {
  const size_t place = Place(layer);
  DSCALE_CHECK(slot >= 0 && slot < num_slots_);
  const int64_t offset = slot * row_elements_ * KvDtypeSize(dtype_);
  StoreRow(k, row_elements_, dtype_, k_[place].data() + offset);
  StoreRow(v, row_elements_, dtype_, v_[place].data() + offset);
}

void KvStore::Read(int32_t layer, int32_t slot, float* k, float* v) const {
  const size_t place = Place(layer);
  DSCALE_CHECK(slot >= 0 && slot < num_slots_);
  const int64_t offset = slot * row_elements_ * KvDtypeSize(dtype_);
  ReadRow(k_[place].data() + offset, row_elements_, dtype_, k);
  ReadRow(v_[place].data() + offset, row_elements_, dtype_, v);
}

cpu::PagedKvLayer KvStore::Layer(int32_t layer) const {
  const size_t place = Place(layer);
  const std::byte* k = k_[place].data();
  const std::byte* v = v_[place].data();
  if (dtype_ == KvDtype::kBf16) {
    return {.page_size = page_size_,
            .k_bf16 = reinterpret_cast<const uint16_t*>(k),
            .v_bf16 = reinterpret_cast<const uint16_t*>(v)};
  }
  return {.k = reinterpret_cast<const float*>(k),
          .v = reinterpret_cast<const float*>(v),
          .page_size = page_size_};
}

PagedKvCache::PagedKvCache(const KvCacheShape& shape)
    : shape_(shape),
      allocator_(shape.num_pages),
      store_(shape.num_layers, shape.kv_heads, shape.head_dim,
             static_cast<int64_t>(shape.num_pages) * shape.page_size, shape.page_size, shape.dtype,
             shape.attention_index),
      recurrent_(shape.recurrent),
      id_(NextCacheId()) {
  DSCALE_CHECK_MSG(int64_t{shape.num_pages} * shape.page_size <= MaxKvPositions(shape.page_size),
                   "KV slots must fit int32");
}

void PagedKvCache::EnablePrefixCache(int32_t recurrent_states) {
  DSCALE_CHECK_MSG(num_sequences() == 0, "prefix caching starts on an empty cache");
  DSCALE_CHECK(recurrent_states >= 0);
  prefix_.emplace(shape_.num_pages, shape_.page_size);
  refs_.assign(static_cast<size_t>(shape_.num_pages), 0);
  snapshots_ = RecurrentSnapshots(shape_.recurrent.empty() ? 0 : recurrent_states);
}

int32_t PagedKvCache::TakePage() {
  int32_t page = allocator_.free_pages() > 0 ? allocator_.Allocate() : -1;
  if (page < 0 && prefix_) {
    page = prefix_->EvictOldest();
    DSCALE_CHECK(page >= 0 && refs_[page] == 0);
    snapshots_.Drop(page);
  }
  DSCALE_CHECK_MSG(page >= 0, "no page to take");
  if (prefix_) refs_[page] = 1;
  return page;
}

void PagedKvCache::ReleasePage(int32_t page) {
  if (!prefix_) return allocator_.Free(page);
  DSCALE_CHECK(refs_[page] > 0);
  if (--refs_[page] > 0) return;
  if (prefix_->published(page)) {
    prefix_->Release(page);
  } else {
    allocator_.Free(page);
  }
}

std::vector<int32_t> PagedKvCache::MatchPrefix(std::span<const int32_t> tokens, int32_t max_pages,
                                               bool draft_rows) const {
  std::vector<int32_t> pages;
  if (!prefix_) return pages;
  const int32_t ps = shape_.page_size;
  const int32_t limit = std::min<int32_t>(max_pages, static_cast<int32_t>(tokens.size()) / ps);
  int32_t parent = -1;
  for (int32_t i = 0; i < limit; ++i) {
    const int32_t page = prefix_->Find(parent, tokens.subspan(static_cast<size_t>(i) * ps, ps));
    if (page < 0 || (draft_rows && !prefix_->draft_rows(page))) break;
    pages.push_back(page);
    parent = page;
  }
  return pages;
}

int32_t PagedKvCache::ResumablePages(std::span<const int32_t> pages) const {
  if (shape_.recurrent.empty()) return static_cast<int32_t>(pages.size());
  auto n = static_cast<int32_t>(pages.size());
  while (n > 0 && !snapshots_.Has(pages[static_cast<size_t>(n) - 1])) --n;
  return n;
}

int32_t PagedKvCache::PublishedPageFor(std::span<const int32_t> tokens) const {
  const auto pages = static_cast<int32_t>(tokens.size()) / shape_.page_size;
  const std::vector<int32_t> match = MatchPrefix(tokens, pages, /*draft_rows=*/false);
  return pages > 0 && static_cast<int32_t>(match.size()) == pages ? match.back() : -1;
}

void PagedKvCache::PublishPrefix(int32_t seq, std::span<const int32_t> tokens, bool draft_rows) {
  if (!prefix_) return;
  Sequence& s = Live(seq);
  const int32_t ps = shape_.page_size;
  const auto full = std::min<size_t>(tokens.size() / ps, s.pages.size());
  int32_t parent = -1;
  for (size_t i = 0; i < full; ++i) {
    const int32_t page = s.pages[i];
    if (!prefix_->published(page) &&
        !prefix_->Publish(page, parent, tokens.subspan(i * ps, ps), draft_rows)) {
      break;
    }
    parent = page;
  }
  std::erase_if(s.kept_states, [&](const KeptState& kept) {
    if (static_cast<size_t>(kept.length) > tokens.size()) return false;
    const int32_t page = PublishedPageFor(tokens.first(static_cast<size_t>(kept.length)));
    if (page >= 0) snapshots_.Put(page, kept.values);
    return page >= 0;
  });
}

void PagedKvCache::KeepRecurrentState(int32_t seq, std::span<const int32_t> tokens,
                                      std::span<const float> state) {
  if (!prefix_ || snapshots_.capacity() == 0) return;
  Sequence& s = Live(seq);
  const auto length = static_cast<int32_t>(tokens.size());
  DSCALE_CHECK_MSG(length > 0 && length % shape_.page_size == 0 &&
                       state.size() == static_cast<size_t>(recurrent_.StateValues()),
                   "a recurrent state is kept at a page's end");
  if (const int32_t page = PublishedPageFor(tokens); page >= 0) {
    snapshots_.Put(page, state);
    return;
  }
  std::erase_if(s.kept_states, [&](const KeptState& kept) { return kept.length == length; });
  s.kept_states.push_back({.length = length, .values = {state.begin(), state.end()}});
}

int32_t PagedKvCache::FreePagesSharing(std::span<const int32_t> shared) const {
  int32_t cached = 0;
  for (const int32_t page : shared) cached += prefix_ && prefix_->evictable(page) ? 1 : 0;
  return free_pages() - cached;
}

int32_t PagedKvCache::AddSequence(std::span<const int32_t> shared) {
  int32_t id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<int32_t>(sequences_.size());
    sequences_.emplace_back();
  }
  sequences_[id] = Sequence{.live = true, .length = 0, .pages = {}};
  DSCALE_CHECK(shared.empty() || prefix_);
  DSCALE_CHECK_MSG(ResumablePages(shared) == static_cast<int32_t>(shared.size()),
                   "a hybrid target's shared pages end at one carrying a recurrent state");
  recurrent_.Reset(id);
  for (const int32_t page : shared) {
    prefix_->Acquire(page);
    ++refs_[page];
    sequences_[id].pages.push_back(page);
  }
  sequences_[id].length = static_cast<int32_t>(shared.size()) * shape_.page_size;
  if (!shape_.recurrent.empty() && !shared.empty()) {
    recurrent_.Restore(id, snapshots_.Use(shared.back()), sequences_[id].length);
  }
  return id;
}

void PagedKvCache::RemoveSequence(int32_t seq) {
  Sequence& s = Live(seq);
  for (int32_t page : s.pages) ReleasePage(page);
  s = Sequence{};
  recurrent_.Remove(seq);
  free_ids_.push_back(seq);
}

int32_t PagedKvCache::PagesNeeded(int32_t seq, int32_t length) const {
  const int32_t pages = (length + shape_.page_size - 1) / shape_.page_size;
  return std::max(0, pages - static_cast<int32_t>(Live(seq).pages.size()));
}

Status PagedKvCache::Reserve(int32_t seq, int32_t length) {
  DSCALE_CHECK(length >= 0);
  const int32_t needed = PagesNeeded(seq, length);
  if (needed > free_pages()) {
    return ResourceExhausted("KV cache: " + std::to_string(needed) + " pages needed, " +
                             std::to_string(free_pages()) + " free");
  }
  Sequence& s = Live(seq);
  for (int32_t i = 0; i < needed; ++i) s.pages.push_back(TakePage());
  s.length = std::max(s.length, length);
  return Status::Ok();
}

int32_t PagedKvCache::Length(int32_t seq) const { return Live(seq).length; }

const std::vector<int32_t>& PagedKvCache::PageTable(int32_t seq) const { return Live(seq).pages; }

int32_t PagedKvCache::Slot(int32_t seq, int32_t pos) const {
  const Sequence& s = Live(seq);
  DSCALE_CHECK(pos >= 0 && pos < s.length);
  return s.pages[static_cast<size_t>(pos / shape_.page_size)] * shape_.page_size +
         pos % shape_.page_size;
}

void AddRequestRows(StepBatch& batch, int32_t seq, int32_t ctx_len, std::span<const int32_t> tokens,
                    const PagedKvCache& cache, bool all_logits, SpanRows rows) {
  const auto n = static_cast<int32_t>(tokens.size());
  DSCALE_CHECK(n > 0);
  DSCALE_CHECK_MSG(cache.Length(seq) >= ctx_len + n, "KV positions not reserved");
  batch.BeginSpan(seq, ctx_len, cache.PageTable(seq).data(), rows);
  for (int32_t j = 0; j < n; ++j) {
    batch.AddRow(tokens[static_cast<size_t>(j)], cache.Slot(seq, ctx_len + j),
                 all_logits || j == n - 1);
  }
}

int64_t MaxKvPositions(int32_t page_size) {
  return int64_t{std::numeric_limits<int32_t>::max()} / page_size * page_size;
}

int32_t PagedKvCache::num_sequences() const {
  return static_cast<int32_t>(sequences_.size() - free_ids_.size());
}

const PagedKvCache::Sequence& PagedKvCache::Live(int32_t seq) const {
  DSCALE_CHECK(seq >= 0 && seq < static_cast<int32_t>(sequences_.size()));
  DSCALE_CHECK_MSG(sequences_[seq].live, "unknown KV sequence");
  return sequences_[seq];
}

PagedKvCache::Sequence& PagedKvCache::Live(int32_t seq) {
  return const_cast<Sequence&>(std::as_const(*this).Live(seq));
}

}  // namespace dscale
