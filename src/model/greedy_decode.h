#pragma once
// Plain greedy decoding with the target alone: one prefill, then one token per step. It is the
// specification speculative modes are checked against, and `dscale generate`'s path until the
// speculative engine drives it.

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "model/target_model.h"

namespace dscale {

struct GreedyOptions {
  int32_t max_new_tokens = 16;
  std::vector<int64_t> stop_ids;  // generation ends after emitting one of these
  int32_t prefill_chunk = 0;      // > 0: prefill in chunks of this many rows
  int32_t page_size = 16;
  KvDtype kv_dtype = KvDtype::kBf16;  // as the engine's default
};

// The generated ids (prompt excluded). Errors: empty prompt, out-of-vocabulary ids, prompt plus
// output longer than max_position_embeddings.
Result<std::vector<int32_t>> GreedyDecode(TargetModel& model, const std::vector<int32_t>& prompt,
                                          const GreedyOptions& options);

}  // namespace dscale
