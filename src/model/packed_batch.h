#pragma once
// The packed ragged batch every forward pass takes: prefill chunks, plain decode, drafting and
// verification all use it. Rows of all requests sit back to back; each row carries its token,
// its absolute position and the KV slot its keys/values are written to.

#include <cstdint>
#include <span>
#include <vector>

#include "kv/paged_kv_cache.h"

namespace dscale {

// One request's rows: [q_start, q_start + q_len), at positions ctx_len .. ctx_len + q_len − 1,
// after ctx_len positions already in its KV sequence `seq`.
struct BatchRequest {
  int32_t seq = -1;
  int32_t q_start = 0;
  int32_t q_len = 0;
  int32_t ctx_len = 0;
};

struct PackedBatch {
  std::vector<int32_t> tokens;     // [rows]
  std::vector<int32_t> positions;  // [rows]
  std::vector<int64_t> kv_slots;   // [rows]
  std::vector<BatchRequest> requests;
  std::vector<int32_t> logit_rows;  // rows whose logits are computed, in output order

  int32_t rows() const { return static_cast<int32_t>(tokens.size()); }
  // Largest q_len of any request (selects the attention tile height).
  int32_t MaxQueryLen() const;
  void Clear();

  // Appends `tokens` as the next rows of sequence `seq`, continuing after ctx_len committed
  // positions. The cache must already hold ctx_len + tokens.size() positions for `seq`
  // (PagedKvCache::Reserve). Logits are requested for every new row (all_logits) or only for
  // the last one.
  void AddRequest(int32_t seq, int32_t ctx_len, std::span<const int32_t> new_tokens,
                  const PagedKvCache& cache, bool all_logits);
};

}  // namespace dscale
