#pragma once
// A device mirror of a host StepBatch (core/step_batch.h): its live rows, spans and the spans'
// page tables, for forwards outside a bucket's fixed-address workspace (prefill, the host-driven
// drafter, tests that compare the device forward with DecoderModel::Forward on the same batch).

#include <cstdint>

#include "core/step_batch.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_check.h"
#include "kv/paged_kv_cache.h"
#include "model/cuda/device_forward.h"

namespace dscale::cuda {

class DeviceBatch {
 public:
  // Copies the live rows and each span's page table as they are now (synchronously).
  DeviceBatch(const StepBatch& batch, const PagedKvCache& cache);

  // Every row is live; causality and tile height are the host batch's. Valid while this object
  // lives.
  DeviceBatchView view() const;

 private:
  int32_t rows_ = 0;
  int32_t max_q_len_ = 0;
  int tile_rows_ = 128;
  bool causal_ = true;
  DeviceBuffer<int32_t> tokens_, positions_, kv_slots_;
  DeviceBuffer<int32_t> page_tables_;  // every span's table, back to back
  DeviceBuffer<StepSpan> spans_;
};

}  // namespace dscale::cuda
