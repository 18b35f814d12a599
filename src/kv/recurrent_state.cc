#include "kv/recurrent_state.h"

#include <algorithm>

#include "core/check.h"

namespace dscale {

int32_t RecurrentStateShape::linear_layers() const {
  return static_cast<int32_t>(
      std::count_if(linear_index.begin(), linear_index.end(), [](int32_t i) { return i >= 0; }));
}

int64_t RecurrentStateShape::BytesPerSequence() const {
  return int64_t{linear_layers()} * (conv_values + delta_values) * 4;
}

void RecurrentStates::Reset(int32_t seq) {
  if (shape_.empty()) return;
  DSCALE_CHECK(seq >= 0);
  if (static_cast<size_t>(seq) >= sequences_.size()) sequences_.resize(seq + 1);
  Sequence& s = sequences_[seq];
  s.position = 0;
  s.values.assign(
      static_cast<size_t>(shape_.linear_layers() * (shape_.conv_values + shape_.delta_values)),
      0.0f);
}

void RecurrentStates::Remove(int32_t seq) {
  if (shape_.empty()) return;
  Live(seq) = Sequence{};
}

RecurrentStates::Sequence& RecurrentStates::Live(int32_t seq) {
  DSCALE_CHECK(seq >= 0 && static_cast<size_t>(seq) < sequences_.size());
  Sequence& s = sequences_[seq];
  DSCALE_CHECK_MSG(!s.values.empty(), "no recurrent state for this sequence");
  return s;
}

const RecurrentStates::Sequence& RecurrentStates::Live(int32_t seq) const {
  return const_cast<RecurrentStates*>(this)->Live(seq);
}

float* RecurrentStates::LayerValues(int32_t seq, int32_t layer) {
  DSCALE_CHECK(layer >= 0 && static_cast<size_t>(layer) < shape_.linear_index.size());
  const int32_t index = shape_.linear_index[layer];
  DSCALE_CHECK_MSG(index >= 0, "not a linear-attention layer");
  return Live(seq).values.data() + index * (shape_.conv_values + shape_.delta_values);
}

float* RecurrentStates::Conv(int32_t seq, int32_t layer) { return LayerValues(seq, layer); }

float* RecurrentStates::Delta(int32_t seq, int32_t layer) {
  return LayerValues(seq, layer) + shape_.conv_values;
}

int32_t RecurrentStates::position(int32_t seq) const { return Live(seq).position; }

void RecurrentStates::set_position(int32_t seq, int32_t position) { Live(seq).position = position; }

}  // namespace dscale
