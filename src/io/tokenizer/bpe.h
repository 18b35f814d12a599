#pragma once
// Byte-pair encoding of one pre-tokenized piece: start from one token per byte, then
// repeatedly merge the adjacent pair with the lowest merge rank (the leftmost such pair on a
// tie) until no adjacent pair has a merge. This is the rule of the reference tokenizer, so
// ids come out the same.

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "io/tokenizer/bpe_vocab.h"

namespace dscale {

// Thread-safe: EncodePiece may run concurrently (the word cache takes a lock).
class BpeModel {
 public:
  // Builds the merge table; DataLoss when a merge names a token missing from the vocab, or
  // when a byte has no single-character token.
  static Result<std::unique_ptr<BpeModel>> Create(const BpeVocab& vocab);

  // Appends the ids of `piece` (raw bytes, one pre-tokenizer piece) to *ids.
  void EncodePiece(std::string_view piece, std::vector<int32_t>* ids) const;

  // Two implementations of the same merge rule: a quadratic scan, fastest on the short
  // pieces that make up most text, and a heap over a linked list for long ones (a run of
  // CJK characters can be one piece of thousands of bytes). kAuto picks by length.
  enum class Algorithm { kAuto, kScan, kHeap };
  static constexpr size_t kScanMaxBytes = 48;  // kScan takes pieces up to this size

  // Merging without the cache, for tests that compare the algorithms.
  void EncodePieceUncached(std::string_view piece, Algorithm algorithm,
                           std::vector<int32_t>* ids) const;

 private:
  struct MergeSlot {
    uint64_t key = kEmptyKey;  // left id << 32 | right id
    int32_t rank = 0;
    int32_t merged = 0;
  };
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};

  BpeModel() = default;
  void InsertMerge(int32_t left, int32_t right, int32_t rank, int32_t merged);
  const MergeSlot* FindMerge(int32_t left, int32_t right) const;
  void MergeByScan(std::vector<int32_t>* symbols) const;
  void MergeByHeap(std::vector<int32_t>* symbols) const;

  std::array<int32_t, 256> byte_ids_{};  // the single-byte token of each byte value
  std::vector<MergeSlot> merge_slots_;   // open addressing, linear probing; size 2^k
  int merge_shift_ = 64;                 // 64 - k
  // Only for ignore_merges: the byte-level spelling of a piece -> id.
  bool ignore_merges_ = false;
  std::unordered_map<std::string, int32_t> whole_tokens_;

  // Word cache: most pieces ("Ġthe", "Ġof") repeat, and a lookup is several times cheaper
  // than merging. A fixed-size table of one-cache-line slots: no allocation, bounded memory
  // (4 MiB); a full probe window evicts an entry.
  struct CacheSlot {
    uint64_t hash = 0;  // 0: empty
    uint8_t key_size = 0;
    uint8_t id_count = 0;
    char key[22];
    int32_t ids[8];
  };
  static_assert(sizeof(CacheSlot) == 64);
  static constexpr size_t kCacheSlots = size_t{1} << 16;
  static constexpr size_t kCacheProbe = 4;
  bool CacheLookup(std::string_view piece, uint64_t hash, std::vector<int32_t>* ids) const;
  void CacheStore(std::string_view piece, uint64_t hash, std::span<const int32_t> ids) const;

  mutable std::mutex cache_mutex_;
  mutable std::vector<CacheSlot> cache_;  // kCacheSlots, allocated on first use
};

}  // namespace dscale
