#pragma once
// Paged KV cache: fixed-size pages handed out by a free-list allocator, a page table per
// sequence, and per-layer K/V storage addressed by slot = page · page_size + offset.
//
// Capacity (pages reserved) and content (rows written) are separate. The engine reserves, when it
// admits a request, every page the request can ever write: its prompt, max_tokens and the last
// step's draft block past them (Engine::PagesFor); the pages go back when the request ends
// (RemoveSequence). In between, each forward writes K/V rows at its rows' slots: a verify step
// the committed position and the drafts it verifies, the drafter its transient block. Rows past
// the committed length (rejected drafts, the drafter's block) are left as they are and nobody
// removes them: attention reads positions below each span's ctx_len + q_len only, and the next
// step writes its own rows over them, starting at the committed length. A recurrent state (the
// hybrid targets' linear-attention layers) cannot be overwritten back that way: its contract is
// kv/recurrent_state.h's, the cache keeping one per sequence beside the K/V. Running out of pages
// is a kResourceExhausted Status the scheduler acts on (the request waits); nothing is changed
// then.
//
// With prefix caching (EnablePrefixCache), pages have reference counts: a sequence may start
// with published pages of earlier ones (kv/prefix_index.h) and share them; a published page no
// sequence holds stays cached, counts as free, and is evicted (least recently released first)
// only when a page is needed and none is free.
// A hybrid target's sequence also needs the recurrent state after the shared pages: it may start
// only with pages the last of which carries one (kv/recurrent_snapshots.h; KeepRecurrentState
// makes them, ResumablePages bounds a match by them).

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/huge_pages.h"
#include "core/status.h"
#include "core/step_batch.h"
#include "kernels/cpu/attention.h"
#include "kv/kv_dtype.h"
#include "kv/prefix_index.h"
#include "kv/recurrent_snapshots.h"
#include "kv/recurrent_state.h"
#include "kv/zero_mapped_bytes.h"

namespace dscale {

struct KvCacheShape {
  int32_t num_layers = 0;
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
  int32_t page_size = 16;  // positions per page
  int32_t num_pages = 0;
  KvDtype dtype = KvDtype::kBf16;  // how the host rows are stored (a device cache keeps f32)
  RecurrentStateShape recurrent;   // a hybrid target's linear layers; empty otherwise
  // [model layers]: the layer's place among the num_layers that keep K/V, or −1 (a hybrid's
  // linear-attention layer keeps none); empty: model layer i keeps place i.
  std::vector<int32_t> attention_index;

  KvCacheShape WithDtype(KvDtype d) const {
    KvCacheShape shape = *this;
    shape.dtype = d;
    return shape;
  }
};

// Free-list of page ids 0 .. num_pages − 1. Not thread-safe (owned by the engine thread).
class PageAllocator {
 public:
  explicit PageAllocator(int32_t num_pages);
  // −1 when no page is free.
  int32_t Allocate();
  void Free(int32_t page);
  int32_t free_pages() const { return static_cast<int32_t>(free_.size()); }
  int32_t total_pages() const { return total_; }

 private:
  int32_t total_;
  std::vector<int32_t> free_;       // stack; lowest ids handed out first
  std::vector<uint8_t> allocated_;  // CHECKs double frees
};

// Per-layer K and V rows addressed by slot: [num_slots, kv_heads, head_dim] per layer, as BF16
// (each value rounded to nearest even) or f32. Zero layers is allowed: a cache whose rows live
// elsewhere (on the device) keeps pages only. Rows read as zeros until written and take resident
// memory only once written (ZeroMappedBytes). The target's rows live in PagedKvCache's store; the
// DFlash drafter keeps its own store of the same slot count and dtype, so a token's draft K/V sit
// at the same slot as its target K/V and the page tables serve both.
class KvStore {
 public:
  // `layer_index`: KvCacheShape::attention_index (empty: layer i is stored at place i). Every
  // method takes a model layer, one that keeps K/V.
  KvStore(int32_t num_layers, int32_t kv_heads, int32_t head_dim, int64_t num_slots,
          int32_t page_size, KvDtype dtype, std::vector<int32_t> layer_index = {});

  // Writes one position's K and V rows ([kv_heads · head_dim] f32 each) at `slot` of `layer`,
  // rounded to the store's dtype. The same f32 rows always store the same bits.
  void Store(int32_t layer, int32_t slot, const float* k, const float* v);
  // The stored K and V rows at `slot` of `layer`, as f32 ([kv_heads · head_dim] each).
  void Read(int32_t layer, int32_t slot, float* k, float* v) const;
  // The layer's rows for attention: the f32 pair or the BF16 pair set, as stored.
  cpu::PagedKvLayer Layer(int32_t layer) const;
  // The layers stored.
  int32_t num_layers() const { return static_cast<int32_t>(k_.size()); }
  int64_t num_slots() const { return num_slots_; }
  KvDtype dtype() const { return dtype_; }

 private:
  // Where model layer `layer` is stored (CHECKed to keep K/V).
  size_t Place(int32_t layer) const;

  int64_t row_elements_;  // kv_heads · head_dim
  int64_t num_slots_;
  int32_t page_size_;
  KvDtype dtype_;
  std::vector<ZeroMappedBytes> k_;
  std::vector<ZeroMappedBytes> v_;
  std::vector<int32_t> layer_index_;
};

class PagedKvCache {
 public:
  explicit PagedKvCache(const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }

  // A new sequence with no positions, or starting with `shared` (pages MatchPrefix returned:
  // its first shared.size() · page_size positions, already written). Ids are reused after
  // RemoveSequence.
  int32_t AddSequence(std::span<const int32_t> shared = {});
  // Releases every page of `seq` (freed, or kept cached when published); the id becomes invalid.
  void RemoveSequence(int32_t seq);

  // Prefix caching from now on (before any sequence exists), with at most `recurrent_states`
  // pages carrying a hybrid target's recurrent state (none without linear-attention layers).
  void EnablePrefixCache(int32_t recurrent_states = 0);
  bool prefix_cache() const { return prefix_.has_value(); }
  // The published pages holding tokens[0 .. k · page_size) for the largest k ≤ max_pages, each
  // with the drafter's rows too when `draft_rows`. Empty without prefix caching.
  std::vector<int32_t> MatchPrefix(std::span<const int32_t> tokens, int32_t max_pages,
                                   bool draft_rows) const;
  // How many of `pages` (a MatchPrefix) a new sequence may start with: all of them without
  // linear-attention layers, else up to the last that carries a recurrent state.
  int32_t ResumablePages(std::span<const int32_t> pages) const;
  // Publishes the full pages of `seq` holding `tokens` (its positions 0 .. tokens.size() − 1,
  // whose K/V rows are written and final), in order, stopping at the first that another page
  // already stands for; then the state KeepRecurrentState kept goes to the page that now stands
  // for its prefix. No-op without prefix caching.
  void PublishPrefix(int32_t seq, std::span<const int32_t> tokens, bool draft_rows);
  // `state`: a hybrid target's recurrent state of `seq` after its first tokens.size() positions,
  // a whole number of pages (`tokens`: theirs). The page standing for that prefix carries a copy
  // of it, now if one is published, else once PublishPrefix publishes one (a prompt's pages are
  // published when its prefill ends, so the copies taken in its chunks wait until then). No-op
  // without prefix caching.
  void KeepRecurrentState(int32_t seq, std::span<const int32_t> tokens,
                          std::span<const float> state);
  // Free pages once `shared` are taken by a new sequence (cached ones among them stop counting).
  int32_t FreePagesSharing(std::span<const int32_t> shared) const;

  // Makes room for positions 0 .. length − 1. kResourceExhausted (and no change) when the free
  // pages do not suffice.
  Status Reserve(int32_t seq, int32_t length);

  // Positions currently reserved.
  int32_t Length(int32_t seq) const;
  const std::vector<int32_t>& PageTable(int32_t seq) const;
  // Slot of position `pos` (< Length(seq)). Slots are int32 everywhere: the constructor checks
  // that num_pages · page_size fits.
  int32_t Slot(int32_t seq, int32_t pos) const;
  // Pages needed to grow `seq` to `length` positions.
  int32_t PagesNeeded(int32_t seq, int32_t length) const;

  // The target's K/V rows.
  void Store(int32_t layer, int32_t slot, const float* k, const float* v) {
    store_.Store(layer, slot, k, v);
  }
  cpu::PagedKvLayer Layer(int32_t layer) const { return store_.Layer(layer); }
  int64_t num_slots() const { return store_.num_slots(); }
  KvStore& store() { return store_; }
  // The sequences' linear-attention states (empty shape for a target without such layers).
  RecurrentStates& recurrent() { return recurrent_; }

  // Pages a Reserve may take: free ones and cached ones no sequence holds.
  int32_t free_pages() const {
    return allocator_.free_pages() + (prefix_ ? prefix_->evictable_count() : 0);
  }
  int32_t num_sequences() const;
  // The recurrent states published pages carry (prefix caching on a hybrid target).
  int32_t recurrent_snapshots() const { return snapshots_.size(); }
  // Distinct for every cache constructed in this process: lets a model that keeps K/V rows of
  // its own (DeviceTarget) tell which cache's page tables a batch refers to.
  uint64_t id() const { return id_; }

 private:
  struct KeptState {
    int32_t length = 0;  // the prefix it stands after
    HugePageVector<float> values;
  };
  struct Sequence {
    bool live = false;
    int32_t length = 0;
    std::vector<int32_t> pages;
    // KeepRecurrentState's copies waiting for their pages to be published.
    std::vector<KeptState> kept_states;
  };
  const Sequence& Live(int32_t seq) const;
  Sequence& Live(int32_t seq);
  // A page for a sequence: a free one, else the least recently released cached one.
  int32_t TakePage();
  // A sequence lets go of `page`.
  void ReleasePage(int32_t page);
  // The published page standing for `tokens` (whole pages), or −1.
  int32_t PublishedPageFor(std::span<const int32_t> tokens) const;

  KvCacheShape shape_;
  PageAllocator allocator_;
  KvStore store_;
  RecurrentStates recurrent_;
  std::vector<Sequence> sequences_;
  std::vector<int32_t> free_ids_;
  std::optional<PrefixIndex> prefix_;
  std::vector<int32_t> refs_;  // [num_pages] sequences holding each page (prefix caching)
  RecurrentSnapshots snapshots_;  // the states after published pages (a hybrid target's)
  uint64_t id_;
};

// Appends `tokens` to `batch` as one span: sequence `seq`'s positions ctx_len .. ctx_len + n − 1
// (reserved in `cache`) at their slots, with logits wanted for every row (all_logits) or for
// the last one only; `rows` says whether they all commit (StepSpan::always_kept).
void AddRequestRows(StepBatch& batch, int32_t seq, int32_t ctx_len, std::span<const int32_t> tokens,
                    const PagedKvCache& cache, bool all_logits,
                    SpanRows rows = SpanRows::kVerified);

// Positions a cache may hold: slots are int32.
int64_t MaxKvPositions(int32_t page_size);

}  // namespace dscale
