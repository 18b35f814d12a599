#include "model/cuda/device_batch.h"

#include <limits>
#include <vector>

#include "core/check.h"

namespace dscale::cuda {
namespace {

std::vector<int32_t> SlotsAsInt32(const std::vector<int64_t>& slots) {
  std::vector<int32_t> narrow;
  narrow.reserve(slots.size());
  for (const int64_t slot : slots) {
    DSCALE_CHECK(slot >= 0 && slot <= std::numeric_limits<int32_t>::max());
    narrow.push_back(static_cast<int32_t>(slot));
  }
  return narrow;
}

}  // namespace

DeviceBatch::DeviceBatch(const PackedBatch& batch, const PagedKvCache& cache, int tile_rows)
    : rows_(batch.rows()),
      max_q_len_(batch.MaxQueryLen()),
      tile_rows_(tile_rows),
      tokens_(batch.tokens.data(), batch.tokens.size()),
      positions_(batch.positions.data(), batch.positions.size()) {
  DSCALE_CHECK(batch.positions.size() == batch.tokens.size());
  DSCALE_CHECK(batch.kv_slots.size() == batch.tokens.size());
  const std::vector<int32_t> slots = SlotsAsInt32(batch.kv_slots);
  kv_slots_ = DeviceBuffer<int32_t>(slots.data(), slots.size());

  // Page tables back to back; each span points at its own table inside the device copy.
  std::vector<int32_t> tables;
  std::vector<size_t> table_start;
  for (const BatchRequest& r : batch.requests) {
    table_start.push_back(tables.size());
    const std::vector<int32_t>& pages = cache.PageTable(r.seq);
    tables.insert(tables.end(), pages.begin(), pages.end());
  }
  page_tables_ = DeviceBuffer<int32_t>(tables.data(), tables.size());
  std::vector<AttentionSpan> spans;
  for (size_t i = 0; i < batch.requests.size(); ++i) {
    const BatchRequest& r = batch.requests[i];
    spans.push_back({.q_start = r.q_start,
                     .q_len = r.q_len,
                     .ctx_len = r.ctx_len,
                     .page_table = page_tables_.data() + table_start[i]});
  }
  spans_ = DeviceBuffer<AttentionSpan>(spans.data(), spans.size());
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
          .tile_rows = tile_rows_};
}

}  // namespace dscale::cuda
