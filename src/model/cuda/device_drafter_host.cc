#include "model/cuda/device_drafter_host.h"

#include <algorithm>
#include <string>

#include "core/check.h"
#include "model/cuda/device_batch.h"

namespace dscale::cuda {
namespace {

// Queues a copy of host[0, count) into device[0, count) (pageable memory: the call returns once
// the source has been staged, so the source may go away afterwards).
template <typename T>
void CopyToDevice(const T* host, int64_t count, T* device, cudaStream_t stream) {
  if (count == 0) return;
  DSCALE_CUDA_CHECK(
      cudaMemcpyAsync(device, host, Count(count) * sizeof(T), cudaMemcpyHostToDevice, stream));
}

template <typename T>
void CopyToHost(const T* device, int64_t count, T* host, cudaStream_t stream) {
  if (count == 0) return;
  DSCALE_CUDA_CHECK(
      cudaMemcpyAsync(host, device, Count(count) * sizeof(T), cudaMemcpyDeviceToHost, stream));
}

}  // namespace

DeviceDrafterHost::DeviceDrafterHost(DeviceDFlashDrafter& drafter, int32_t max_requests,
                                     int32_t max_context_rows, cudaStream_t stream)
    : drafter_(&drafter),
      stream_(stream),
      scratch_(drafter, max_requests, max_context_rows),
      features_(Count(int64_t{max_context_rows} * drafter.feature_width())),
      positions_(Count(max_context_rows)),
      slots_(Count(max_context_rows)),
      tokens_(Count(int64_t{max_requests} * (drafter.block_size() - 1))),
      logits_(Count(int64_t{max_requests} * (drafter.block_size() - 1) * drafter.vocab())),
      hidden_(Count(int64_t{max_requests} * (drafter.block_size() - 1) * drafter.dims().hidden)) {}

void DeviceDrafterHost::Bind(const PagedKvCache& cache) {
  DSCALE_CUDA_CHECK(cudaStreamSynchronize(stream_));  // nothing may still use the old rows
  drafter_->ResetKv(cache.shape());
  bound_ = true;
}

void DeviceDrafterHost::AppendContext(const ContextRows& rows) {
  DSCALE_CHECK_MSG(bound_, "Bind the drafter to a KV cache first");
  const auto total = static_cast<int64_t>(rows.positions.size());
  DSCALE_CHECK(rows.slots.size() == rows.positions.size());
  DSCALE_CHECK(static_cast<int64_t>(rows.features.size()) == total * drafter_->feature_width());
  for (int64_t begin = 0; begin < total; begin += scratch_.max_context_rows()) {
    const auto count =
        static_cast<int32_t>(std::min<int64_t>(scratch_.max_context_rows(), total - begin));
    AppendChunk(rows, begin, count);
  }
  DSCALE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void DeviceDrafterHost::AppendChunk(const ContextRows& rows, int64_t begin, int32_t count) {
  const int64_t width = drafter_->feature_width();
  CopyToDevice(rows.features.data() + begin * width, int64_t{count} * width, features_.data(),
               stream_);
  CopyToDevice(rows.positions.data() + begin, count, positions_.data(), stream_);
  CopyToDevice(rows.slots.data() + begin, count, slots_.data(), stream_);
  drafter_->EnqueueAppendContext({.rows = count,
                                  .features = features_.data(),
                                  .positions = positions_.data(),
                                  .kv_slots = slots_.data(),
                                  .live_rows = nullptr},
                                 scratch_, stream_);
}

Status DeviceDrafterHost::Draft(std::span<const DraftRequest> requests, const PagedKvCache& cache,
                                int tile_rows, DraftOutput* out) {
  DSCALE_CHECK_MSG(bound_, "Bind the drafter to a KV cache first");
  DSCALE_CHECK(cache.num_slots() == drafter_->kv().num_slots());
  const int32_t candidates = drafter_->block_size() - 1;
  const auto rows = static_cast<int64_t>(requests.size()) * candidates;
  out->candidates = candidates;
  out->tokens.resize(Count(rows));
  out->logits.resize(Count(rows * drafter_->vocab()));
  out->hidden.resize(Count(rows * drafter_->dims().hidden));
  const size_t chunk = Count(scratch_.max_requests());
  for (size_t begin = 0; begin < requests.size(); begin += chunk) {
    const size_t count = std::min(chunk, requests.size() - begin);
    DraftChunk(requests.subspan(begin, count), cache, tile_rows,
               static_cast<int64_t>(begin) * candidates, out);
  }
  return Status::Ok();
}

void DeviceDrafterHost::DraftChunk(std::span<const DraftRequest> requests,
                                   const PagedKvCache& cache, int tile_rows, int64_t first_row,
                                   DraftOutput* out) {
  const int32_t block = drafter_->block_size();
  // Request i's block at rows i·W .. i·W + W − 1, the layout EnqueueDraft expects.
  StageDraftBlocks(requests, cache, static_cast<int32_t>(drafter_->config().mask_token_id), block,
                   drafter_->vocab(), blocks_);
  blocks_.tile_rows = tile_rows;
  const DeviceBatch device_blocks(blocks_, cache);
  drafter_->EnqueueDraft(
      device_blocks.view(), scratch_,
      {.tokens = tokens_.data(), .logits = logits_.data(), .hidden = hidden_.data()}, stream_);
  const int64_t rows = static_cast<int64_t>(requests.size()) * (block - 1);
  const int64_t vocab = drafter_->vocab();
  const int64_t hidden = drafter_->dims().hidden;
  CopyToHost(tokens_.data(), rows, out->tokens.data() + first_row, stream_);
  CopyToHost(logits_.data(), rows * vocab, out->logits.data() + first_row * vocab, stream_);
  CopyToHost(hidden_.data(), rows * hidden, out->hidden.data() + first_row * hidden, stream_);
  // The device copies of the blocks are freed when this returns: wait for the work first.
  DSCALE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

}  // namespace dscale::cuda
