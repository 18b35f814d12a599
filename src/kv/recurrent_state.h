#pragma once
// The per-request state of a hybrid target's linear-attention (Gated DeltaNet) layers, kept
// beside the paged K/V of its attention layers (paged_kv_cache.h).
//
// Contract. A request's recurrent state is the state after exactly `position(seq)` of its
// positions: per linear layer the conv's last K − 1 inputs ([K − 1, conv_dim], oldest first)
// and the delta rule's state ([value_heads, key_dim, value_dim]), both f32 and zero at position
// 0. Unlike K/V rows, it cannot be overwritten back: a forward over a span must start at
// ctx_len == position(seq) and leaves the state at ctx_len + q_len, every row of the span
// consumed. Rows the engine does not keep (rejected drafts) must therefore never reach the
// state: until verification restores the state at the accepted prefix, the engine runs hybrid
// targets with plain decoding only (every row it forwards is kept). Prefix caching cannot share
// these states and is refused for hybrid targets. Not thread-safe (owned by the engine thread).

#include <cstdint>
#include <utility>
#include <vector>

namespace dscale {

struct RecurrentStateShape {
  std::vector<int32_t>
      linear_index;          // [num_layers]: the layer's index among the linear ones, or −1
  int64_t conv_values = 0;   // (conv_kernel − 1) · conv_dim per linear layer
  int64_t delta_values = 0;  // value_heads · key_dim · value_dim per linear layer

  int32_t linear_layers() const;
  bool empty() const { return linear_layers() == 0; }
  // f32 bytes one request's state takes.
  int64_t BytesPerSequence() const;
};

class RecurrentStates {
 public:
  RecurrentStates() = default;
  explicit RecurrentStates(RecurrentStateShape shape) : shape_(std::move(shape)) {}

  const RecurrentStateShape& shape() const { return shape_; }
  // Sequence `seq` (a PagedKvCache id) at position 0: every state zero. No-op without linear
  // layers.
  void Reset(int32_t seq);
  // Frees the sequence's states.
  void Remove(int32_t seq);
  // Layer `layer`'s (a linear one) conv window and delta-rule state of `seq`.
  float* Conv(int32_t seq, int32_t layer);
  float* Delta(int32_t seq, int32_t layer);
  int32_t position(int32_t seq) const;
  void set_position(int32_t seq, int32_t position);

 private:
  struct Sequence {
    int32_t position = 0;
    std::vector<float> values;  // per linear layer: conv_values, then delta_values
  };
  Sequence& Live(int32_t seq);
  const Sequence& Live(int32_t seq) const;
  float* LayerValues(int32_t seq, int32_t layer);

  RecurrentStateShape shape_;
  std::vector<Sequence> sequences_;  // by sequence id
};

}  // namespace dscale
