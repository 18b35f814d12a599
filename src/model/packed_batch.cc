#include "model/packed_batch.h"

#include <algorithm>

namespace dscale {

int32_t PackedBatch::MaxQueryLen() const {
  int32_t longest = 0;
  for (const BatchRequest& r : requests) longest = std::max(longest, r.q_len);
  return longest;
}

void PackedBatch::Clear() {
  tokens.clear();
  positions.clear();
  kv_slots.clear();
  requests.clear();
  logit_rows.clear();
}

void PackedBatch::AddRequest(int32_t seq, int32_t ctx_len, std::span<const int32_t> new_tokens,
                             const PagedKvCache& cache, bool all_logits) {
  const int32_t q_len = static_cast<int32_t>(new_tokens.size());
  DSCALE_CHECK(q_len > 0);
  DSCALE_CHECK_MSG(cache.Length(seq) >= ctx_len + q_len, "KV positions not reserved");
  const int32_t q_start = rows();
  requests.push_back({.seq = seq, .q_start = q_start, .q_len = q_len, .ctx_len = ctx_len});
  for (int32_t j = 0; j < q_len; ++j) {
    tokens.push_back(new_tokens[j]);
    positions.push_back(ctx_len + j);
    kv_slots.push_back(cache.Slot(seq, ctx_len + j));
    if (all_logits || j == q_len - 1) logit_rows.push_back(q_start + j);
  }
}

}  // namespace dscale
