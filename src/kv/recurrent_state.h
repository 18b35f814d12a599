#pragma once
// The per-request state of a hybrid target's linear-attention (Gated DeltaNet) layers, kept
// beside the paged K/V of its attention layers (paged_kv_cache.h).
//
// Contract. Per sequence, a committed state: per linear layer the conv's last K − 1 inputs
// ([K − 1, conv_dim], oldest first) and the delta rule's state ([value_heads, key_dim,
// value_dim]), f32, zero at position 0, standing after exactly position(seq) positions. Unlike
// K/V rows it cannot be overwritten back, so a forward of rows that may be rejected never changes
// it: a span starts at ctx_len == position(seq) (BeginSpan) and runs on a working copy (each
// layer's kernels read the committed state and write the state after the span there, so it is
// never copied whole), keeping each row's layer inputs (in_proj's qkv, b and a rows) beside it. A
// span whose rows all commit whatever is accepted (StepSpan::always_kept: a prompt chunk, a
// request's next token alone) runs on the committed state in place and keeps no inputs: a
// separate copy would cost a one-row step another stream over the state (2 MiB a layer at
// Qwen3.5's shapes; at many requests the step's largest cost after the weights). The sequence
// then holds `pending_rows()` rows past its committed state until the model commits a length
// (TargetModel::CommitSequenceState, an explicit stage of the engine's step after acceptance, also
// run at a forward's start for a sequence still pending): all the rows — the working copy becomes
// the state — or a prefix of them — the kept rows' inputs are replayed from the committed state
// through the same kernels, so the state holds the same bits the verify computed after its last
// accepted row, and a rejected draft leaves nothing behind. Each row advances the state on its own,
// in row order, so the state after a position holds the same bits however the rows before it were
// split into spans: prefix caching copies it at a page's end (kv/recurrent_snapshots.h) and a later
// sequence starts from the copy. Not thread-safe (owned by the engine thread).

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/huge_pages.h"

namespace dscale {

struct RecurrentStateShape {
  std::vector<int32_t>
      linear_index;          // [num_layers]: the layer's index among the linear ones, or −1
  int64_t conv_values = 0;   // (conv_kernel − 1) · conv_dim per linear layer
  int64_t delta_values = 0;  // value_heads · key_dim · value_dim per linear layer
  int64_t input_values = 0;  // a row's replay inputs per linear layer: conv_dim + 2 · heads

  int32_t linear_layers() const;
  bool empty() const { return linear_layers() == 0; }
  // f32 bytes of one request's committed state (its working copy doubles it).
  int64_t BytesPerSequence() const;
};

class RecurrentStates {
 public:
  RecurrentStates() = default;
  explicit RecurrentStates(RecurrentStateShape shape) : shape_(std::move(shape)) {}

  const RecurrentStateShape& shape() const { return shape_; }
  // Sequence `seq` (a PagedKvCache id) at position 0: every state zero, nothing pending. No-op
  // without linear layers.
  void Reset(int32_t seq);
  void Remove(int32_t seq);

  int32_t position(int32_t seq) const;
  int32_t pending_rows(int32_t seq) const;
  // The committed state (nothing may be pending): per linear layer its conv values, then its
  // delta values (StateValues() in all).
  std::span<const float> Committed(int32_t seq) const;
  // `seq`, just Reset, continues from `values`: a committed state standing after `position`.
  void Restore(int32_t seq, std::span<const float> values, int32_t position);
  // Positions inside `seq`'s next span (ascending, past its first row) after which the forward
  // copies the working state (CpuOps::RecurrentSpans): the page ends a prompt keeps for the
  // prefix cache, taken in the pass that computes them instead of a pass ending there. Kept
  // until ClearCaptures.
  void CaptureAfter(int32_t seq, std::span<const int32_t> positions);
  std::span<const int32_t> capture_positions(int32_t seq) const;
  // Where the forward copies layer `layer`'s working state after capture_positions()[i].
  float* Capture(int32_t seq, size_t i, int32_t layer);
  // The whole state after capture_positions()[i] (the layout of Committed).
  std::span<const float> CapturedState(int32_t seq, size_t i) const;
  void ClearCaptures(int32_t seq);
  // Floats in one sequence's state: per linear layer conv_values + delta_values.
  int64_t StateValues() const;
  // A forward of `rows` rows from the committed position (nothing may be pending): the working
  // copy is sized for the forward to fill, each linear layer's from the committed state; or,
  // `in_place` (rows that all commit), the forward advances the committed state itself.
  void BeginSpan(int32_t seq, int32_t rows, bool in_place);
  bool in_place(int32_t seq) const;
  // The working copy of layer `layer` (a linear one; the committed state itself in place) and
  // its rows' inputs [rows, input_values] (none in place).
  float* WorkingConv(int32_t seq, int32_t layer);
  float* WorkingDelta(int32_t seq, int32_t layer);
  float* Inputs(int32_t seq, int32_t layer);
  // The committed state of `layer` (what a replay advances).
  float* Conv(int32_t seq, int32_t layer);
  float* Delta(int32_t seq, int32_t layer);
  // All pending rows kept: the working copy becomes the state.
  void AdoptWorking(int32_t seq);
  // After the caller replayed `rows` pending rows into the committed state: the position moves
  // by `rows` and nothing is pending. A span that ran in place keeps all its rows.
  void FinishReplay(int32_t seq, int32_t rows);

 private:
  // A sequence id's state and buffers; a removed id (not live) keeps its two states for the next.
  struct Sequence {
    bool live = false;
    int32_t position = 0;
    int32_t pending = 0;
    bool in_place = false;          // the pending span runs on `values`
    HugePageVector<float> values;   // per linear layer: conv_values, then delta_values
    HugePageVector<float> working;  // the same layout: the state after a pending span
    HugePageVector<float> inputs;   // per linear layer: [pending, input_values]
    std::vector<int32_t> capture_at;
    HugePageVector<float> captured;  // [capture_at.size(), StateValues()]
  };
  Sequence& Live(int32_t seq);
  const Sequence& Live(int32_t seq) const;
  int64_t LayerOffset(int32_t layer) const;

  RecurrentStateShape shape_;
  std::vector<Sequence> sequences_;  // by sequence id
};

}  // namespace dscale
