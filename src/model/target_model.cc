#include "model/target_model.h"

#include <string>

#include "core/check.h"

namespace dscale {

Status ValidateForward(const Qwen3Config& config, const PackedBatch& batch,
                       const ForwardOptions& options, const PagedKvCache& cache) {
  const size_t rows = batch.tokens.size();
  DSCALE_CHECK(batch.positions.size() == rows && batch.kv_slots.size() == rows);
  int32_t next_row = 0;
  for (const BatchRequest& r : batch.requests) {
    DSCALE_CHECK_MSG(r.q_start == next_row && r.q_len > 0, "requests must tile the rows");
    DSCALE_CHECK_MSG(cache.Length(r.seq) >= r.ctx_len + r.q_len, "KV positions not reserved");
    next_row += r.q_len;
  }
  DSCALE_CHECK_MSG(next_row == static_cast<int32_t>(rows), "requests must tile the rows");
  for (int32_t row : batch.logit_rows) DSCALE_CHECK(row >= 0 && row < next_row);
  for (size_t i = 0; i < rows; ++i) {
    if (batch.tokens[i] < 0 || batch.tokens[i] >= config.vocab_size) {
      return InvalidArgument("token id " + std::to_string(batch.tokens[i]) + " at row " +
                             std::to_string(i) + " is outside the vocabulary [0, " +
                             std::to_string(config.vocab_size) + ")");
    }
  }
  for (int32_t layer : options.capture_layers) {
    if (layer < 0 || layer >= config.num_hidden_layers) {
      return InvalidArgument("capture layer " + std::to_string(layer) + " is outside [0, " +
                             std::to_string(config.num_hidden_layers) + ")");
    }
  }
  return Status::Ok();
}

}  // namespace dscale
