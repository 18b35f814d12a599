#pragma once
// A target whose logits turn NaN for chosen requests, as a model whose activations overflowed
// gives them: every logit row of a sequence whose prompt starts with `marker` and that predicts
// position `from_position` or later. Other rows pass through unchanged. For tests of how the
// engine and the server treat a request that cannot be sampled.

#include <algorithm>
#include <limits>
#include <set>

#include "model/target_model.h"

namespace dscale::testing {

class PoisonedTarget : public TargetModel {
 public:
  PoisonedTarget(TargetModel& inner, int32_t marker, int32_t from_position)
      : inner_(inner), marker_(marker), from_position_(from_position) {}

  const DecoderConfig& config() const override { return inner_.config(); }
  KvCacheShape KvShape(int32_t page_size, int32_t num_pages) const override {
    return inner_.KvShape(page_size, num_pages);
  }

  Status Forward(const StepBatch& batch, PagedKvCache& cache, ForwardOutput* out) override {
    DSCALE_RETURN_IF_ERROR(inner_.Forward(batch, cache, out));
    for (const StepSpan& r : batch.spans()) {
      if (r.ctx_len != 0) continue;  // a prompt's first chunk says whether the sequence is marked
      if (batch.tokens()[r.q_start] == marker_) {
        marked_.insert(r.seq);
      } else {
        marked_.erase(r.seq);  // a sequence id used again
      }
    }
    const int64_t vocab = config().vocab_size;
    for (size_t i = 0; i < batch.logit_rows().size(); ++i) {
      const int32_t row = batch.logit_rows()[i];
      if (!marked_.contains(SeqOfRow(batch, row)) || batch.positions()[row] + 1 < from_position_) {
        continue;
      }
      std::fill_n(out->logits.begin() + static_cast<int64_t>(i) * vocab, vocab,
                  std::numeric_limits<float>::quiet_NaN());
      ++poisoned_rows_;
    }
    return Status::Ok();
  }

  int64_t poisoned_rows() const { return poisoned_rows_; }

 private:
  static int32_t SeqOfRow(const StepBatch& batch, int32_t row) {
    return batch.spans()[batch.owners()[row]].seq;
  }

  TargetModel& inner_;
  const int32_t marker_;
  const int32_t from_position_;
  std::set<int32_t> marked_;
  int64_t poisoned_rows_ = 0;
};

}  // namespace dscale::testing
