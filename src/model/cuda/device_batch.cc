#include "model/cuda/device_batch.h"

#include <vector>

namespace dscale::cuda {

DeviceBatch::DeviceBatch(const StepBatch& batch, const PagedKvCache& cache)
    : rows_(batch.rows()),
      max_q_len_(batch.MaxQueryLen()),
      tile_rows_(batch.tile_rows),
      causal_(batch.causal),
      tokens_(batch.tokens().data(), batch.tokens().size()),
      positions_(batch.positions().data(), batch.positions().size()),
      kv_slots_(batch.kv_slots().data(), batch.kv_slots().size()) {
  // Page tables back to back; each span points at its own table inside the device copy.
  std::vector<int32_t> tables;
  std::vector<size_t> table_start;
  for (const StepSpan& s : batch.spans()) {
    table_start.push_back(tables.size());
    const std::vector<int32_t>& pages = cache.PageTable(s.seq);
    tables.insert(tables.end(), pages.begin(), pages.end());
  }
  page_tables_ = DeviceBuffer<int32_t>(tables.data(), tables.size());
  std::vector<StepSpan> spans(batch.spans().begin(), batch.spans().end());
  for (size_t i = 0; i < spans.size(); ++i) {
    spans[i].page_table = page_tables_.data() + table_start[i];
  }
  spans_ = DeviceBuffer<StepSpan>(spans.data(), spans.size());
}

DeviceBatchView DeviceBatch::view() const {
  return {.rows = rows_,
          .tokens = tokens_.data(),
          .positions = positions_.data(),
          .kv_slots = kv_slots_.data(),
          .live_rows = nullptr,
          .spans = spans_.data(),
          .num_spans = static_cast<int32_t>(spans_.size()),
          .max_q_len = max_q_len_,
          .tile_rows = tile_rows_,
          .causal = causal_};
}

}  // namespace dscale::cuda
