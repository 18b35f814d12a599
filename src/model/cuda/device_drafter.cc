#include "model/cuda/device_drafter.h"

#include <algorithm>
#include <utility>

#include "core/check.h"

namespace dscale::cuda {
namespace {

int64_t FeatureWidth(const DFlashConfig& c) {
  return static_cast<int64_t>(c.target_layer_ids.size()) * c.draft.hidden_size;
}

KvCacheShape DraftKvShape(const DFlashConfig& c, const KvCacheShape& target_kv) {
  return {.num_layers = static_cast<int32_t>(c.draft.num_hidden_layers),
          .kv_heads = static_cast<int32_t>(c.draft.num_key_value_heads),
          .head_dim = static_cast<int32_t>(c.draft.head_dim),
          .page_size = target_kv.page_size,
          .num_pages = target_kv.num_pages};
}

}  // namespace

int64_t DeviceDFlashWeights::bytes() const {
  auto total = static_cast<int64_t>(fc.bytes() + hidden_norm.bytes() + final_norm.bytes());
  for (const DeviceLayerWeights& l : layers) total += l.bytes();
  return total;
}

DeviceDFlashWeights UploadDFlashWeights(const DFlashConfig& config, const DFlashWeights& weights) {
  const int64_t h = config.draft.hidden_size;
  DSCALE_CHECK(static_cast<int64_t>(weights.fc.size()) == h * FeatureWidth(config));
  DSCALE_CHECK(static_cast<int64_t>(weights.hidden_norm.size()) == h);
  DSCALE_CHECK(static_cast<int64_t>(weights.final_norm.size()) == h);
  DSCALE_CHECK(static_cast<int64_t>(weights.layers.size()) == config.draft.num_hidden_layers);
  DeviceDFlashWeights d;
  d.fc = UploadAsBf16(weights.fc);
  d.hidden_norm = UploadF32(weights.hidden_norm);
  for (const DecoderLayerWeights& layer : weights.layers) {
    d.layers.push_back(UploadLayerWeights(layer));
  }
  d.final_norm = UploadF32(weights.final_norm);
  return d;
}

DeviceDFlashDrafter::DeviceDFlashDrafter(DFlashConfig config, DeviceDFlashWeights weights,
                                         const DeviceDecoderModel& target,
                                         const KvCacheShape& target_kv)
    : config_(std::move(config)),
      dims_(LayerDims::From(config_.draft)),
      weights_(std::move(weights)),
      target_(&target),
      kv_(DraftKvShape(config_, target_kv)) {
  DSCALE_CHECK(config_.draft.hidden_size == target.config().hidden_size);
  DSCALE_CHECK(static_cast<int64_t>(weights_.layers.size()) == config_.draft.num_hidden_layers);
  DSCALE_CHECK_MSG(!config_.is_dspark(), "the device drafter computes DFlash drafters only");
  DSCALE_CHECK(config_.block_size >= 2);
  DSCALE_CHECK(config_.mask_token_id >= 0 && config_.mask_token_id < target.config().vocab_size);
  for (const DeviceLayerWeights& w : weights_.layers) {
    context_kv_.push_back(w.qkv.data() + dims_.q_dim() * dims_.hidden);
  }
}

void DeviceDFlashDrafter::ResetKv(const KvCacheShape& target_kv) {
  kv_ = DeviceKvCache();  // free the old rows before allocating the new ones
  kv_ = DeviceKvCache(DraftKvShape(config_, target_kv));
}

int64_t DeviceDFlashDrafter::feature_width() const { return FeatureWidth(config_); }

void DeviceDFlashDrafter::EnqueueAppendContext(const DeviceContextRows& context,
                                               DeviceDraftScratch& s, cudaStream_t stream) {
  DSCALE_CHECK(context.rows >= 0 && context.rows <= s.max_context_rows());
  const BatchView rows{.rows = context.rows,
                       .positions = context.positions,
                       .kv_slots = context.kv_slots,
                       .live_rows = context.live_rows};
  CudaOps ops(gemm_, s.layer, stream);
  RunDFlashContext(ops, weights_, context_kv_, dims_, feature_width(), rows, context.features, kv_,
                   s.layer);
}

void DeviceDFlashDrafter::EnqueueDraft(const DeviceBatchView& blocks, DeviceDraftScratch& s,
                                       const DeviceDraftOutputs& out, cudaStream_t stream) {
  const int32_t block = config_.block_size;
  const int32_t n = blocks.num_spans;
  DSCALE_CHECK_MSG(!blocks.causal, "the draft block attends non-causally");
  DSCALE_CHECK(n >= 0 && n <= s.max_requests());
  DSCALE_CHECK(blocks.rows == n * block);
  DSCALE_CHECK(blocks.max_q_len >= block);
  DSCALE_CHECK(out.tokens != nullptr && out.logits != nullptr && out.hidden != nullptr);
  const DeviceDecoderWeights& target = target_->weights();
  CudaOps ops(gemm_, s.layer, stream);
  // The device drafter runs the original layout only (the CUDA backend refuses others).
  RunDFlashDraft(ops, weights_, target.embed, target.LmHead(), vocab(), vocab(), dims_,
                 config_.Block(), blocks, DraftLayout{}, kv_, s.layer, out);
}

DeviceDraftScratch::DeviceDraftScratch(const DeviceDFlashDrafter& drafter, int32_t max_requests,
                                       int32_t max_context_rows)
    : layer(drafter.dims(),
            std::max(int64_t{max_requests} * drafter.block_size(), int64_t{max_context_rows}),
            int64_t{max_context_rows} * drafter.feature_width()),
      max_requests_(max_requests),
      max_context_rows_(max_context_rows) {
  DSCALE_CHECK(max_requests >= 1 && max_context_rows >= 1);
}

}  // namespace dscale::cuda
