#pragma once
// Attention over a paged KV cache for the spans of a StepBatch (core/step_batch.h).
//
// Span i owns rows [q_start, q_start + q_len); its row j sits at absolute position
// ctx_len + j. The keys and
// values of positions 0 .. ctx_len + q_len − 1 (this batch's rows included: the caller stores
// them before calling) live in the paged cache at slot
//   page_table[p / page_size] · page_size + p % page_size.
// Causal: row j sees positions 0 .. ctx_len + j (the target). Non-causal: row j sees all
// ctx_len + q_len positions (the DFlash drafter's block). A window W > 0 (sliding-window draft
// layers) further limits row j, at position p = ctx_len + j, to positions q with p − q < W, and
// when non-causal also q − p < W; the positions a row may not see still pass through its online
// softmax, with probability exactly 0, so a row's bits do not depend on the tile it is in.
//
// The kernel walks each (request, head) in query tiles of kTileRows rows; a tile loads each key
// and value row once and reuses it for every live row of the tile. The tile height is a
// compile-time parameter chosen at run time (16 for verification and drafting, 128 for
// prefill): the path-aware tile router's hook.
//
// K/V rows are f32 or BF16. BF16 rows are widened to f32 (exactly): in registers where a tile
// has few query rows (decode), or as each chunk of keys is copied into the tile's scratch, with
// the vectors of a Bf16Isa variant (bf16_isa.h); from there on the arithmetic is the f32 rows'
// own, so BF16 rows give the bits their f32 widening gives. A score sums head_dim in one fixed
// order (attention_tiles.h), so a row's output has the same bits in every tile and batch.

#include <cstdint>

#include "core/step_batch.h"
#include "kernels/cpu/bf16_isa.h"

namespace dscale::cpu {

// One layer's K and V rows: either the f32 pair or the BF16 pair is set, never both.
struct PagedKvLayer {
  const float* k = nullptr;  // [num_slots, kv_heads, head_dim] f32
  const float* v = nullptr;  // [num_slots, kv_heads, head_dim] f32
  int32_t page_size = 0;
  const uint16_t* k_bf16 = nullptr;  // [num_slots, kv_heads, head_dim] BF16 bits
  const uint16_t* v_bf16 = nullptr;  // [num_slots, kv_heads, head_dim] BF16 bits

  bool bf16() const { return k_bf16 != nullptr; }
};

struct AttentionParams {
  const float* q = nullptr;  // row r, head h at q + r·q_row_stride + h·head_dim
  int64_t q_row_stride = 0;
  float* out = nullptr;  // [rows, heads·head_dim], dense
  int32_t heads = 0;
  int32_t kv_heads = 0;  // heads % kv_heads == 0; query head h reads kv head h / (heads/kv_heads)
  int32_t head_dim = 0;
  float scale = 0;  // usually 1/sqrt(head_dim)
  bool causal = true;
  const StepSpan* spans = nullptr;  // a StepBatch's spans (core/step_batch.h)
  int32_t num_spans = 0;
  PagedKvLayer kv;
  int32_t window = 0;  // > 0: the sliding window above; 0: none
};

// Query-row tile heights that are compiled.
inline constexpr int kAttentionTileHeights[] = {16, 64, 128};

// BF16 rows are widened with `isa`'s vectors (which must be in SupportedBf16Isas()).
template <int kTileRows>
void PagedAttentionTiled(const AttentionParams& params, Bf16Isa isa);

// Dispatches to the compiled tile height `tile_rows` (one of kAttentionTileHeights; CHECKed).
// BF16 rows are widened with BestBf16Isa(), or with `isa` (parity tests run every variant).
void PagedAttention(const AttentionParams& params, int tile_rows);
void PagedAttention(const AttentionParams& params, int tile_rows, Bf16Isa isa);

}  // namespace dscale::cpu
