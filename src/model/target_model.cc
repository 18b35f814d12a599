#include "model/target_model.h"

#include <string>

#include "core/check.h"

namespace dscale {

Status CheckTokenIds(std::span<const int32_t> ids, int64_t vocab, std::string_view what) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return InvalidArgument(std::string(what) + ": token id " + std::to_string(ids[i]) +
                             " at position " + std::to_string(i) +
                             " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
  return Status::Ok();
}

void CheckForward(const DecoderConfig& config, const StepBatch& batch, const PagedKvCache& cache) {
  DSCALE_CHECK_MSG(batch.causal, "the target attends causally");
  int32_t next_row = 0;
  for (const StepSpan& s : batch.spans()) {
    DSCALE_CHECK_MSG(s.q_start == next_row && s.q_len > 0, "spans must tile the rows");
    DSCALE_CHECK_MSG(cache.Length(s.seq) >= s.ctx_len + s.q_len, "KV positions not reserved");
    next_row += s.q_len;
  }
  DSCALE_CHECK_MSG(next_row == batch.rows(), "spans must tile the rows");
  for (int32_t row : batch.logit_rows()) DSCALE_CHECK(row >= 0 && row < next_row);
  for (int32_t token : batch.tokens()) {
    DSCALE_CHECK_MSG(token >= 0 && token < config.vocab_size, "token outside the vocabulary");
  }
  for (int32_t layer : batch.capture_layers) {
    DSCALE_CHECK_MSG(layer >= 0 && layer < config.num_hidden_layers, "capture layer outside");
  }
}

}  // namespace dscale
