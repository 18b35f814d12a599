#include "kv/recurrent_state.h"

#include <algorithm>

#include "core/check.h"

namespace dscale {
namespace {
constexpr const char* kInPlaceKeepsAll =
    "a span that ran in place on the committed state keeps all its rows (no replay inputs)";
}  // namespace

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
  // The id's buffers from its last sequence are reused: a state is tens of MB, and memory the
  // process returned and maps again costs a page fault per 4 KB on the next request's first span.
  Sequence& s = sequences_[seq];
  s.live = true;
  s.position = 0;
  s.pending = 0;
  s.values.assign(static_cast<size_t>(StateValues()), 0.0f);
  // `working` keeps its size: a span's forward writes all of it (BeginSpan).
  s.inputs.clear();
  s.capture_at.clear();
  s.captured.clear();
}

void RecurrentStates::Remove(int32_t seq) {
  if (shape_.empty()) return;
  // The two states (what the memory budget counts a running request) stay for the id's next
  // sequence (Reset); the rows' inputs, up to a prompt chunk's (400 MB at 512 rows of
  // Qwen3.5-4B), and any captured states go.
  Sequence& s = Live(seq);
  s.live = false;
  HugePageVector<float>().swap(s.inputs);
  HugePageVector<float>().swap(s.captured);
  s.capture_at.clear();
}

RecurrentStates::Sequence& RecurrentStates::Live(int32_t seq) {
  DSCALE_CHECK(seq >= 0 && static_cast<size_t>(seq) < sequences_.size());
  Sequence& s = sequences_[seq];
  DSCALE_CHECK_MSG(s.live, "no recurrent state for this sequence");
  return s;
}

const RecurrentStates::Sequence& RecurrentStates::Live(int32_t seq) const {
  return const_cast<RecurrentStates*>(this)->Live(seq);
}

int64_t RecurrentStates::LayerOffset(int32_t layer) const {
  DSCALE_CHECK(layer >= 0 && static_cast<size_t>(layer) < shape_.linear_index.size());
  const int32_t index = shape_.linear_index[layer];
  DSCALE_CHECK_MSG(index >= 0, "not a linear-attention layer");
  return index;
}

int32_t RecurrentStates::position(int32_t seq) const { return Live(seq).position; }

int32_t RecurrentStates::pending_rows(int32_t seq) const { return Live(seq).pending; }

std::span<const float> RecurrentStates::Committed(int32_t seq) const {
  const Sequence& s = Live(seq);
  DSCALE_CHECK_MSG(s.pending == 0, "a state is copied once committed");
  return s.values;
}

void RecurrentStates::Restore(int32_t seq, std::span<const float> values, int32_t position) {
  Sequence& s = Live(seq);
  DSCALE_CHECK(s.position == 0 && s.pending == 0 && values.size() == s.values.size());
  DSCALE_CHECK(position >= 0);
  std::copy(values.begin(), values.end(), s.values.begin());
  s.position = position;
}

int64_t RecurrentStates::StateValues() const {
  return shape_.linear_layers() * (shape_.conv_values + shape_.delta_values);
}

void RecurrentStates::CaptureAfter(int32_t seq, std::span<const int32_t> positions) {
  Sequence& s = Live(seq);
  DSCALE_CHECK(std::ranges::is_sorted(positions) &&
               (positions.empty() || positions.front() > s.position));
  s.capture_at.assign(positions.begin(), positions.end());
  s.captured.assign(static_cast<size_t>(StateValues()) * positions.size(), 0.0f);
}

std::span<const int32_t> RecurrentStates::capture_positions(int32_t seq) const {
  return Live(seq).capture_at;
}

float* RecurrentStates::Capture(int32_t seq, size_t i, int32_t layer) {
  Sequence& s = Live(seq);
  DSCALE_CHECK(i < s.capture_at.size());
  return s.captured.data() + static_cast<int64_t>(i) * StateValues() +
         LayerOffset(layer) * (shape_.conv_values + shape_.delta_values);
}

std::span<const float> RecurrentStates::CapturedState(int32_t seq, size_t i) const {
  const Sequence& s = Live(seq);
  DSCALE_CHECK(i < s.capture_at.size());
  return std::span(s.captured)
      .subspan(i * static_cast<size_t>(StateValues()), static_cast<size_t>(StateValues()));
}

void RecurrentStates::ClearCaptures(int32_t seq) {
  Sequence& s = Live(seq);
  s.capture_at.clear();
  s.captured.clear();
}

void RecurrentStates::BeginSpan(int32_t seq, int32_t rows, bool in_place) {
  Sequence& s = Live(seq);
  DSCALE_CHECK_MSG(s.pending == 0, "a span starts from a committed state");
  DSCALE_CHECK(rows > 0);
  s.pending = rows;
  s.in_place = in_place;
  if (in_place) return;
  // Sized, not copied: the forward writes every layer's state after the span there, reading the
  // committed one (CpuOps::RecurrentSpans).
  s.working.resize(s.values.size());
  s.inputs.resize(static_cast<size_t>(shape_.linear_layers() * rows * shape_.input_values));
}

bool RecurrentStates::in_place(int32_t seq) const { return Live(seq).in_place; }

float* RecurrentStates::WorkingConv(int32_t seq, int32_t layer) {
  Sequence& s = Live(seq);
  DSCALE_CHECK(s.pending > 0);
  float* state = s.in_place ? s.values.data() : s.working.data();
  return state + LayerOffset(layer) * (shape_.conv_values + shape_.delta_values);
}

float* RecurrentStates::WorkingDelta(int32_t seq, int32_t layer) {
  return WorkingConv(seq, layer) + shape_.conv_values;
}

float* RecurrentStates::Inputs(int32_t seq, int32_t layer) {
  Sequence& s = Live(seq);
  DSCALE_CHECK(s.pending > 0);
  DSCALE_CHECK_MSG(!s.in_place, kInPlaceKeepsAll);
  return s.inputs.data() + LayerOffset(layer) * s.pending * shape_.input_values;
}

float* RecurrentStates::Conv(int32_t seq, int32_t layer) {
  return Live(seq).values.data() + LayerOffset(layer) * (shape_.conv_values + shape_.delta_values);
}

float* RecurrentStates::Delta(int32_t seq, int32_t layer) {
  return Conv(seq, layer) + shape_.conv_values;
}

void RecurrentStates::AdoptWorking(int32_t seq) {
  Sequence& s = Live(seq);
  DSCALE_CHECK(s.pending > 0);
  if (!s.in_place) std::swap(s.values, s.working);
  s.position += s.pending;
  s.pending = 0;
}

void RecurrentStates::FinishReplay(int32_t seq, int32_t rows) {
  Sequence& s = Live(seq);
  DSCALE_CHECK(rows >= 0 && rows <= s.pending);
  DSCALE_CHECK_MSG(!s.in_place || rows == s.pending, kInPlaceKeepsAll);
  s.position += rows;
  s.pending = 0;
}

}  // namespace dscale
