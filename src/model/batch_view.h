#pragma once
// A StepBatch's rows and spans as pointers (the contract of core/step_batch.h): host memory for
// the CPU backend, device memory for the CUDA one. What the model templates read.

#include <cstdint>

#include "core/step_batch.h"

namespace dscale {

struct BatchView {
  int32_t rows = 0;                    // rows computed; every row array has at least this many
  const int32_t* tokens = nullptr;     // [rows], each in [0, vocab)
  const int32_t* positions = nullptr;  // [rows]
  const int32_t* kv_slots = nullptr;   // [rows]
  // Scalar or null (the device's padded batches). When set, rows at or past *live_rows are
  // padding: they are computed (their outputs are unspecified) but their K/V are not stored.
  const int32_t* live_rows = nullptr;
  const StepSpan* spans = nullptr;  // [num_spans], page tables in the same memory
  int32_t num_spans = 0;
  int32_t max_q_len = 0;  // ≥ every span's q_len: the device attention grid's tile count
  int tile_rows = 128;    // attention query-row tile height, one of kAttentionTileHeights
  // Causal: row j of a span sees its context and rows 0 .. j (the target). Non-causal: every
  // row sees the context and the whole span (the drafter's block).
  bool causal = true;
  // > 0: a sliding window (kernels/cpu/attention.h): a row at position p sees only positions
  // less than `window` away. Only the CPU drafter's sliding-window layers set it.
  int32_t window = 0;
};

// `batch` on host pointers, valid while it is unchanged; every row live.
inline BatchView ViewOf(const StepBatch& batch) {
  return {.rows = batch.rows(),
          .tokens = batch.tokens().data(),
          .positions = batch.positions().data(),
          .kv_slots = batch.kv_slots().data(),
          .spans = batch.spans().data(),
          .num_spans = batch.num_spans(),
          .max_q_len = batch.MaxQueryLen(),
          .tile_rows = batch.tile_rows,
          .causal = batch.causal};
}

}  // namespace dscale
