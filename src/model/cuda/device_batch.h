#pragma once
// Device copies of a host PackedBatch (model/packed_batch.h) and of its requests' page tables,
// for forwards outside a bucket's fixed-address workspace: prefill, and tests that compare the
// device forward with Qwen3Model::Forward on the same batch.

#include <cstdint>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_check.h"
#include "kv/paged_kv_cache.h"
#include "model/cuda/device_forward.h"
#include "model/packed_batch.h"

namespace dscale::cuda {

class DeviceBatch {
 public:
  // Copies rows, slots (which must fit int32) and each request's page table as they are now
  // (synchronously). `tile_rows` is the attention tile height the forward will use.
  DeviceBatch(const PackedBatch& batch, const PagedKvCache& cache, int tile_rows);

  // Every row is live. Valid while this object lives.
  DeviceBatchView view() const;

 private:
  int32_t rows_ = 0;
  int32_t max_q_len_ = 0;
  int tile_rows_ = 128;
  DeviceBuffer<int32_t> tokens_, positions_, kv_slots_;
  DeviceBuffer<int32_t> page_tables_;  // every request's table, back to back
  DeviceBuffer<AttentionSpan> spans_;
};

}  // namespace dscale::cuda
