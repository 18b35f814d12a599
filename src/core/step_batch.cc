#include "core/step_batch.h"

#include <algorithm>

#include "core/check.h"

namespace dscale {

void StepBatch::EnsureCapacity(int32_t rows, int32_t spans) {
  DSCALE_CHECK(rows >= 0 && spans >= 0);
  if (rows > row_capacity()) {
    for (std::vector<int32_t>* v : {&tokens_, &positions_, &kv_slots_, &owners_, &logit_rows_}) {
      v->resize(Count(rows));
    }
  }
  if (spans > span_capacity()) spans_.resize(Count(spans));
}

void StepBatch::Clear() {
  rows_ = 0;
  num_spans_ = 0;
  num_logits_ = 0;
}

void StepBatch::BeginSpan(int32_t seq, int32_t ctx_len, const int32_t* page_table, SpanRows rows) {
  if (num_spans_ == span_capacity()) EnsureCapacity(row_capacity(), std::max(1, 2 * num_spans_));
  spans_[Count(num_spans_++)] = {.q_start = rows_,
                                 .q_len = 0,
                                 .ctx_len = ctx_len,
                                 .page_table = page_table,
                                 .seq = seq,
                                 .always_kept = rows == SpanRows::kAlwaysKept};
}

void StepBatch::AddRow(int32_t token, int32_t kv_slot, bool logits) {
  DSCALE_CHECK_MSG(num_spans_ > 0, "BeginSpan before AddRow");
  if (rows_ == row_capacity()) EnsureCapacity(std::max(16, 2 * rows_), span_capacity());
  StepSpan& span = spans_[Count(num_spans_ - 1)];
  const auto r = Count(rows_);
  tokens_[r] = token;
  positions_[r] = span.ctx_len + span.q_len;
  kv_slots_[r] = kv_slot;
  owners_[r] = num_spans_ - 1;
  if (logits) logit_rows_[Count(num_logits_++)] = rows_;
  ++span.q_len;
  ++rows_;
}

void StepBatch::Append(const StepBatch& other) {
  const int32_t first_row = rows_, first_span = num_spans_, first_logit = num_logits_;
  EnsureCapacity(rows_ + other.rows_, num_spans_ + other.num_spans_);
  for (int32_t s = 0; s < other.num_spans_; ++s) {
    StepSpan span = other.spans_[Count(s)];
    span.q_start += first_row;
    spans_[Count(first_span + s)] = span;
  }
  for (int32_t r = 0; r < other.rows_; ++r) {
    const auto from = Count(r), to = Count(first_row + r);
    tokens_[to] = other.tokens_[from];
    positions_[to] = other.positions_[from];
    kv_slots_[to] = other.kv_slots_[from];
    owners_[to] = other.owners_[from] + first_span;
  }
  for (int32_t l = 0; l < other.num_logits_; ++l) {
    logit_rows_[Count(first_logit + l)] = other.logit_rows_[Count(l)] + first_row;
  }
  rows_ += other.rows_;
  num_spans_ += other.num_spans_;
  num_logits_ += other.num_logits_;
}

void StepBatch::SetLive(int32_t rows, int32_t spans, int32_t logit_rows) {
  DSCALE_CHECK(rows >= 0 && rows <= row_capacity());
  DSCALE_CHECK(spans >= 0 && spans <= span_capacity());
  DSCALE_CHECK(logit_rows >= 0 && logit_rows <= rows);
  rows_ = rows;
  num_spans_ = spans;
  num_logits_ = logit_rows;
}

int32_t StepBatch::MaxQueryLen() const {
  int32_t longest = 0;
  for (const StepSpan& s : spans()) longest = std::max(longest, s.q_len);
  return longest;
}

}  // namespace dscale
