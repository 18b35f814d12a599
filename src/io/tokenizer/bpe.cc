#include "io/tokenizer/bpe.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <optional>
#include <queue>

#include "io/tokenizer/byte_level.h"

namespace dscale {
namespace {

constexpr int32_t kNoMerge = std::numeric_limits<int32_t>::max();

uint64_t MergeKey(int32_t left, int32_t right) {
  return (uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right);
}

// Token text -> id, only while the merge table is built: open addressing with the hash
// stored, several times faster than std::unordered_map on the 150k-entry vocab, which
// matters because loading is start-up time.
class TokenIndex {
 public:
  explicit TokenIndex(const std::vector<std::pair<std::string, int32_t>>& vocab) {
    size_t size = 16;
    while (size < vocab.size() * 4 / 3) size *= 2;  // load factor at most 3/4
    slots_.resize(size);
    for (const auto& [token, id] : vocab) Insert(token, id);
  }

  // A token the vocab lists twice (a JSON object would keep only one of the two ids), if any.
  const std::optional<std::string_view>& duplicate() const { return duplicate_; }

  // -1 when absent.
  int32_t Find(std::string_view token) const {
    const size_t hash = std::hash<std::string_view>{}(token);
    for (size_t i = hash & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      const Slot& slot = slots_[i];
      if (slot.id < 0) return -1;
      if (slot.hash == hash && slot.token == token) return slot.id;
    }
  }

 private:
  struct Slot {
    size_t hash = 0;
    std::string_view token;
    int32_t id = -1;
  };

  void Insert(std::string_view token, int32_t id) {
    const size_t hash = std::hash<std::string_view>{}(token);
    size_t i = hash & (slots_.size() - 1);
    while (slots_[i].id >= 0 && !(slots_[i].hash == hash && slots_[i].token == token)) {
      i = (i + 1) & (slots_.size() - 1);
    }
    if (slots_[i].id >= 0 && !duplicate_) duplicate_ = token;
    slots_[i] = Slot{hash, token, id};
  }

  std::vector<Slot> slots_;
  std::optional<std::string_view> duplicate_;
};

}  // namespace

Result<std::unique_ptr<BpeModel>> BpeModel::Create(const BpeVocab& vocab) {
  std::unique_ptr<BpeModel> model(new BpeModel());
  const TokenIndex ids(vocab.vocab);
  if (ids.duplicate()) {
    return DataLoss(vocab.vocab_source + ": token \"" + std::string(*ids.duplicate()) +
                    "\" is listed twice");
  }

  for (int b = 0; b < 256; ++b) {
    std::string spelled;
    byte_level::AppendEncoded(std::string_view(reinterpret_cast<const char*>(&b), 1), &spelled);
    const int32_t id = ids.Find(spelled);
    if (id < 0) {
      return DataLoss(vocab.vocab_source + ": no token for byte " + std::to_string(b) + " (\"" +
                      spelled + "\"); a byte-level vocab needs all 256");
    }
    model->byte_ids_[b] = id;
  }

  size_t slots = 16;
  while (slots < vocab.merges.size() * 4 / 3) slots *= 2;  // load factor at most 3/4
  model->merge_slots_.assign(slots, MergeSlot{});
  model->merge_shift_ = 64 - std::countr_zero(slots);
  std::string merged;
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const auto& [left, right] = vocab.merges[rank];
    merged.assign(left).append(right);
    const int32_t found[3] = {ids.Find(left), ids.Find(right), ids.Find(merged)};
    for (int k = 0; k < 3; ++k) {
      if (found[k] < 0) {
        const std::string& token = k == 0 ? left : k == 1 ? right : merged;
        return DataLoss(vocab.merges_source + ": merge " + std::to_string(rank) + " (\"" + left +
                        " " + right + "\"): \"" + token + "\" is not in the vocab");
      }
    }
    // A repeated pair keeps its last rank, as the reference does.
    model->InsertMerge(found[0], found[1], static_cast<int32_t>(rank), found[2]);
  }

  if (vocab.ignore_merges) {
    model->ignore_merges_ = true;
    for (const auto& [token, id] : vocab.vocab) model->whole_tokens_.emplace(token, id);
  }
  return model;
}

void BpeModel::InsertMerge(int32_t left, int32_t right, int32_t rank, int32_t merged) {
  const uint64_t key = MergeKey(left, right);
  const uint64_t mask = merge_slots_.size() - 1;
  uint64_t i = (key * 0x9E3779B97F4A7C15ull) >> merge_shift_;
  while (merge_slots_[i].key != kEmptyKey && merge_slots_[i].key != key) i = (i + 1) & mask;
  merge_slots_[i] = MergeSlot{key, rank, merged};
}

const BpeModel::MergeSlot* BpeModel::FindMerge(int32_t left, int32_t right) const {
  const uint64_t key = MergeKey(left, right);
  const uint64_t mask = merge_slots_.size() - 1;
  uint64_t i = (key * 0x9E3779B97F4A7C15ull) >> merge_shift_;
  while (true) {
    const MergeSlot& slot = merge_slots_[i];
    if (slot.key == key) return &slot;
    if (slot.key == kEmptyKey) return nullptr;
    i = (i + 1) & mask;
  }
}

void BpeModel::MergeByScan(std::vector<int32_t>* symbols) const {
  std::vector<int32_t>& s = *symbols;
  // ranks[i], merged[i]: the merge of the pair (s[i], s[i + 1]).
  int32_t ranks[kScanMaxBytes];
  int32_t merged[kScanMaxBytes];
  auto update = [&](size_t i) {
    const MergeSlot* m = FindMerge(s[i], s[i + 1]);
    ranks[i] = m ? m->rank : kNoMerge;
    merged[i] = m ? m->merged : 0;
  };
  for (size_t i = 0; i + 1 < s.size(); ++i) update(i);
  while (s.size() > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < s.size(); ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == kNoMerge) break;
    s[best] = merged[best];
    s.erase(s.begin() + best + 1);
    const size_t pairs = s.size() - 1;
    std::copy(ranks + best + 1, ranks + pairs + 1, ranks + best);
    std::copy(merged + best + 1, merged + pairs + 1, merged + best);
    if (best > 0) update(best - 1);
    if (best < pairs) update(best);
  }
}

void BpeModel::MergeByHeap(std::vector<int32_t>* symbols) const {
  struct Symbol {
    int32_t id;    // -1 once merged into its left neighbour
    int32_t prev;  // index, -1 at the start
    int32_t next;  // index, -1 at the end
  };
  struct Candidate {
    int32_t rank;
    int32_t left;  // symbol index; the order of indices is the order in the text
    int32_t right;
    int32_t left_id;
    int32_t right_id;
    int32_t merged;
    // Lowest rank first, then leftmost: priority_queue pops the "largest".
    bool operator<(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  const int32_t n = static_cast<int32_t>(symbols->size());
  std::vector<Symbol> syms(n);
  for (int32_t i = 0; i < n; ++i) syms[i] = {(*symbols)[i], i - 1, i + 1 < n ? i + 1 : -1};
  std::priority_queue<Candidate> heap;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    if (const MergeSlot* m = FindMerge(syms[left].id, syms[right].id)) {
      heap.push({m->rank, left, right, syms[left].id, syms[right].id, m->merged});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i, i + 1);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& left = syms[c.left];
    Symbol& right = syms[c.right];
    // Stale when either side has merged since: ids only ever grow into longer tokens.
    if (left.id != c.left_id || left.next != c.right || right.id != c.right_id) continue;
    left.id = c.merged;
    left.next = right.next;
    if (right.next >= 0) syms[right.next].prev = c.left;
    right.id = -1;
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }
  symbols->clear();
  for (int32_t i = 0; i >= 0; i = syms[i].next) symbols->push_back(syms[i].id);
}

void BpeModel::EncodePieceUncached(std::string_view piece, Algorithm algorithm,
                                   std::vector<int32_t>* ids) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    std::string spelled;
    byte_level::AppendEncoded(piece, &spelled);
    if (auto it = whole_tokens_.find(spelled); it != whole_tokens_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> symbols(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) symbols[i] = byte_ids_[static_cast<uint8_t>(piece[i])];
  if (algorithm == Algorithm::kAuto) {
    algorithm = symbols.size() <= kScanMaxBytes ? Algorithm::kScan : Algorithm::kHeap;
  }
  if (algorithm == Algorithm::kScan) {
    DSCALE_CHECK(symbols.size() <= kScanMaxBytes);
    MergeByScan(&symbols);
  } else {
    MergeByHeap(&symbols);
  }
  ids->insert(ids->end(), symbols.begin(), symbols.end());
}

bool BpeModel::CacheLookup(std::string_view piece, uint64_t hash, std::vector<int32_t>* ids) const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.empty()) return false;
  for (size_t p = 0; p < kCacheProbe; ++p) {
    const CacheSlot& slot = cache_[(hash + p) & (kCacheSlots - 1)];
    if (slot.hash == hash && std::string_view(slot.key, slot.key_size) == piece) {
      ids->insert(ids->end(), slot.ids, slot.ids + slot.id_count);
      return true;
    }
  }
  return false;
}

void BpeModel::CacheStore(std::string_view piece, uint64_t hash,
                          std::span<const int32_t> ids) const {
  if (ids.size() > std::size(CacheSlot{}.ids)) return;
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.empty()) cache_.resize(kCacheSlots);
  // An empty slot in the probe window, else one chosen by the hash's top bits.
  CacheSlot* target = &cache_[(hash + (hash >> 62)) & (kCacheSlots - 1)];
  for (size_t p = 0; p < kCacheProbe; ++p) {
    CacheSlot& slot = cache_[(hash + p) & (kCacheSlots - 1)];
    if (slot.hash == 0) {
      target = &slot;
      break;
    }
  }
  target->hash = hash;
  target->key_size = static_cast<uint8_t>(piece.size());
  std::copy(piece.begin(), piece.end(), target->key);
  target->id_count = static_cast<uint8_t>(ids.size());
  std::copy(ids.begin(), ids.end(), target->ids);
}

void BpeModel::EncodePiece(std::string_view piece, std::vector<int32_t>* ids) const {
  if (piece.size() == 1) {
    ids->push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  if (piece.size() > sizeof(CacheSlot{}.key)) {
    EncodePieceUncached(piece, Algorithm::kAuto, ids);
    return;
  }
  const uint64_t hash = std::hash<std::string_view>{}(piece) | 1;  // 0 marks an empty slot
  if (CacheLookup(piece, hash, ids)) return;
  const size_t first = ids->size();
  EncodePieceUncached(piece, Algorithm::kAuto, ids);
  CacheStore(piece, hash, std::span<const int32_t>(ids->data() + first, ids->size() - first));
}

}  // namespace dscale
