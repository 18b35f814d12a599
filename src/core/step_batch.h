#pragma once
// The rows of one forward step: prefill chunks, plain decode, a drafter's blocks and the packed
// verification rows alike. It sits in core, below the kernels, because every stage of a step
// reads it: attention (the spans), the models (rows, logit rows, capture layers), the planner's
// pack (writes it) and acceptance (spans and tokens).
//
// Rows of all requests sit back to back. Request i owns rows [q_start, q_start + q_len) at
// positions ctx_len .. ctx_len + q_len − 1, after ctx_len positions already in its KV sequence
// `seq`; row r carries its token, position, KV slot and owning request index. In a verification
// step q_start is the request's offset and q_len its verified rows k.
//
// Storage is sized by EnsureCapacity and reused: the arrays move only when the capacity grows,
// so a batch sized once (a bucket's, dvl/flat_pack.h) keeps its addresses for device copies and
// captured graphs. Rows from rows() up to row_capacity() may hold the packer's placeholders; a
// forward reads only rows().

#include <cstdint>
#include <span>
#include <vector>

namespace dscale {

// One request's rows, as attention reads them (host or device page table).
struct StepSpan {
  int32_t q_start = 0;                  // first row (a verification step's offset)
  int32_t q_len = 0;                    // rows (a verification step's k)
  int32_t ctx_len = 0;                  // positions before the first row
  const int32_t* page_table = nullptr;  // ⌈(ctx_len + q_len) / page_size⌉ page ids of seq
  int32_t seq = -1;                     // KV sequence
  // Every row commits whatever acceptance finds (a prompt chunk, or a request's next token
  // alone), so a hybrid target advances its recurrent state in place, with no working copy for a
  // rejection to discard (kv/recurrent_state.h).
  bool always_kept = false;
};

// Whether a span's rows may be rejected (verification rows) or all commit (StepSpan::always_kept).
enum class SpanRows { kVerified, kAlwaysKept };

// The attention tile height for a batch whose longest span has `max_query_rows` rows: the
// 16-row tile for verification and drafting blocks when tile routing is on, else 128.
inline int TileRowsFor(int32_t max_query_rows, bool tile_routing) {
  return tile_routing && max_query_rows <= 16 ? 16 : 128;
}

class StepBatch {
 public:
  StepBatch() = default;
  StepBatch(int32_t row_capacity, int32_t span_capacity) {
    EnsureCapacity(row_capacity, span_capacity);
  }

  // Grows the arrays to hold at least `rows` rows and `spans` spans (their addresses change
  // only when they grow).
  void EnsureCapacity(int32_t rows, int32_t spans);
  // No rows, spans or logit rows; capture layers, tile and causality stay.
  void Clear();

  // Starts a span for `seq` at the next row; its rows follow with AddRow.
  void BeginSpan(int32_t seq, int32_t ctx_len, const int32_t* page_table,
                 SpanRows rows = SpanRows::kVerified);
  // Appends a row to the last span (at position ctx_len + its index in the span); its logits are
  // wanted when `logits`.
  void AddRow(int32_t token, int32_t kv_slot, bool logits);
  // Appends `other`'s spans and rows after this batch's, its logit rows after this batch's
  // (a decode step's verify rows, then prompt chunks that run in the same pass). Only the rows
  // are copied: tile height, causality and capture layers stay this batch's.
  void Append(const StepBatch& other);
  // Sets the live counts after a writer filled the storage directly (the packer).
  void SetLive(int32_t rows, int32_t spans, int32_t logit_rows);

  int32_t rows() const { return rows_; }
  int32_t num_spans() const { return num_spans_; }
  int32_t row_capacity() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t span_capacity() const { return static_cast<int32_t>(spans_.size()); }
  // Largest q_len of any span (selects the attention tile height).
  int32_t MaxQueryLen() const;

  std::span<const int32_t> tokens() const { return Live(tokens_); }        // [rows]
  std::span<const int32_t> positions() const { return Live(positions_); }  // [rows]
  std::span<const int32_t> kv_slots() const { return Live(kv_slots_); }    // [rows]
  std::span<const int32_t> owners() const { return Live(owners_); }        // [rows] span index
  std::span<const StepSpan> spans() const { return {spans_.data(), Count(num_spans_)}; }
  // Rows whose logits are computed, in output order.
  std::span<const int32_t> logit_rows() const { return {logit_rows_.data(), Count(num_logits_)}; }

  // The whole storage, for writers that fill it in place ([row_capacity] / [span_capacity]).
  std::span<int32_t> token_storage() { return tokens_; }
  std::span<int32_t> position_storage() { return positions_; }
  std::span<int32_t> kv_slot_storage() { return kv_slots_; }
  std::span<int32_t> owner_storage() { return owners_; }
  std::span<int32_t> logit_row_storage() { return logit_rows_; }
  std::span<StepSpan> span_storage() { return spans_; }
  std::span<const int32_t> token_storage() const { return tokens_; }
  std::span<const int32_t> position_storage() const { return positions_; }
  std::span<const int32_t> kv_slot_storage() const { return kv_slots_; }
  std::span<const StepSpan> span_storage() const { return spans_; }

  // How the forward runs: the attention tile height (16 for verification and drafting, 128 for
  // prefill), causal attention (the target) or not (the drafter's block), and the 0-based
  // decoder layers whose output residual streams are captured, in this order.
  int tile_rows = 128;
  bool causal = true;
  std::vector<int32_t> capture_layers;

 private:
  static size_t Count(int32_t n) { return static_cast<size_t>(n); }
  std::span<const int32_t> Live(const std::vector<int32_t>& v) const {
    return {v.data(), Count(rows_)};
  }

  int32_t rows_ = 0;
  int32_t num_spans_ = 0;
  int32_t num_logits_ = 0;
  std::vector<int32_t> tokens_, positions_, kv_slots_, owners_, logit_rows_;  // [row_capacity]
  std::vector<StepSpan> spans_;                                               // [span_capacity]
};

}  // namespace dscale
