#pragma once
// The device DFlash drafter behind the host Drafter interface (model/drafter.h), for an engine
// that keeps its step loop on the host: each call copies its host inputs to the device, queues
// DeviceDFlashDrafter's work and copies DraftOutput back.
//
// This is the slow path and says so: every call copies synchronously in both directions, and a
// draft also allocates device copies of its blocks and page tables (DeviceBatch). A captured
// step keeps its blocks in fixed buffers and feeds EnqueueDraft directly instead.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "kernels/cuda/cuda_check.h"
#include "kv/paged_kv_cache.h"
#include "model/cuda/device_drafter.h"
#include "model/drafter.h"

namespace dscale::cuda {

class DeviceDrafterHost : public Drafter {
 public:
  // `drafter` must outlive the adapter. Drafts run max_requests requests and appends
  // max_context_rows rows at a time (larger calls are split: requests are independent, and so
  // are context rows); all work is queued on `stream` and waited for before a call returns.
  DeviceDrafterHost(DeviceDFlashDrafter& drafter, int32_t max_requests, int32_t max_context_rows,
                    cudaStream_t stream);

  int32_t block_size() const override { return drafter_->block_size(); }
  const std::vector<int32_t>& feature_layers() const override {
    return drafter_->config().target_layer_ids;
  }

  // Gives the device drafter an empty KV cache with `cache`'s pages (DeviceDFlashDrafter::ResetKv),
  // as the CPU drafter's Bind makes a fresh store: each engine binds its own cache once.
  void Bind(const PagedKvCache& cache) override;

  // Copies the rows to the device and appends them to the draft context.
  void AppendContext(const ContextRows& rows) override;

  // Drafts every request's block (the preconditions of Drafter::Draft are CHECKed). tile_rows
  // must be one of kAttentionTileHeights.
  Status Draft(std::span<const DraftRequest> requests, const PagedKvCache& cache, int tile_rows,
               DraftOutput* out) override;

 private:
  void AppendChunk(const ContextRows& rows, int64_t begin, int32_t count);
  // Drafts `requests` (at most max_requests) into `out`'s rows from candidate row `first_row`.
  void DraftChunk(std::span<const DraftRequest> requests, const PagedKvCache& cache, int tile_rows,
                  int64_t first_row, DraftOutput* out);

  DeviceDFlashDrafter* drafter_;
  cudaStream_t stream_;
  bool bound_ = false;
  DeviceDraftScratch scratch_;
  // Context staging, max_context_rows rows.
  DeviceBuffer<float> features_;
  DeviceBuffer<int32_t> positions_, slots_;
  StepBatch blocks_;  // the chunk's blocks on the host, mirrored by a DeviceBatch
  // Draft outputs, max_requests · (W−1) rows.
  DeviceBuffer<int32_t> tokens_;
  DeviceBuffer<float> logits_, hidden_;
};

}  // namespace dscale::cuda
