#include "model/cuda/device_drafter.h"

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/kv_write.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/softmax.h"

namespace dscale::cuda {
namespace {

size_t Count(int64_t n) { return static_cast<size_t>(n); }

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

// dst[i, :] = src[i·W + 1 .. i·W + W − 1, :] for every block i: one strided copy of n pieces of
// (W−1)·hidden floats, W·hidden floats apart in the source.
void GatherCandidateRows(const float* x, int32_t blocks, int32_t block_size, int64_t hidden,
                         float* dst, cudaStream_t stream) {
  const size_t row_bytes = Count(hidden) * sizeof(float);
  const size_t piece = row_bytes * Count(block_size - 1);
  DSCALE_CUDA_CHECK(cudaMemcpy2DAsync(dst, piece, x + hidden, row_bytes * Count(block_size), piece,
                                      Count(blocks), cudaMemcpyDeviceToDevice, stream));
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
  for (const Qwen3LayerWeights& layer : weights.layers) {
    d.layers.push_back(UploadLayerWeights(layer));
  }
  d.final_norm = UploadF32(weights.final_norm);
  return d;
}

DeviceDFlashDrafter::DeviceDFlashDrafter(DFlashConfig config, DeviceDFlashWeights weights,
                                         const DeviceQwen3Model& target,
                                         const KvCacheShape& target_kv)
    : config_(std::move(config)),
      dims_(LayerDims::From(config_.draft)),
      weights_(std::move(weights)),
      target_(&target),
      kv_(DraftKvShape(config_, target_kv)) {
  DSCALE_CHECK(config_.draft.hidden_size == target.config().hidden_size);
  DSCALE_CHECK(static_cast<int64_t>(weights_.layers.size()) == config_.draft.num_hidden_layers);
  DSCALE_CHECK(config_.block_size >= 2);
  DSCALE_CHECK(config_.mask_token_id >= 0 && config_.mask_token_id < target.config().vocab_size);
}

void DeviceDFlashDrafter::ResetKv(const KvCacheShape& target_kv) {
  kv_ = DeviceKvCache();  // free the old rows before allocating the new ones
  kv_ = DeviceKvCache(DraftKvShape(config_, target_kv));
}

int64_t DeviceDFlashDrafter::feature_width() const { return FeatureWidth(config_); }

void DeviceDFlashDrafter::EnqueueAppendContext(const DeviceContextRows& context,
                                               DeviceDraftScratch& s, cudaStream_t stream) {
  const int32_t rows = context.rows;
  DSCALE_CHECK(rows >= 0 && rows <= s.max_context_rows());
  if (rows == 0) return;
  const LayerDims& d = dims_;
  const int64_t kv_cols = 2 * d.kv_dim();
  // c = hidden_norm(fc(features)), computed once and shared by every layer (rounded to BF16
  // once, as each layer's k/v product would round it).
  float* c = s.layer.x.data();
  ProjectBf16(gemm_, context.features, feature_width(), weights_.fc.data(), c, d.hidden, rows,
              false, s.fc_in, stream);
  RmsNorm(c, weights_.hidden_norm.data(), c, rows, d.hidden, d.eps, stream);
  ConvertToBf16(c, s.layer.gemm_in.data(), int64_t{rows} * d.hidden, stream);
  float* kv = s.layer.qkv.data();  // [rows, 2·kv_dim]: [k heads | v heads]
  for (int32_t layer = 0; layer < kv_.shape().num_layers; ++layer) {
    const DeviceLayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
    // The k and v rows of the stacked [q; k; v] matrix, applied without the input norm.
    LinearBf16(gemm_, s.layer.gemm_in.data(), w.qkv.data() + d.q_dim() * d.hidden, kv, rows,
               d.hidden, kv_cols, false, stream);
    HeadRmsNorm(kv, w.k_norm.data(), rows, d.kv_heads, d.head_dim, kv_cols, d.eps, stream);
    ApplyRope(kv, context.positions, rows, d.kv_heads, d.head_dim, kv_cols, d.rope_theta, stream);
    StoreKvRows(kv, kv + d.kv_dim(), kv_cols, context.kv_slots, rows, context.live_rows, d.kv_dim(),
                kv_.k(layer), kv_.v(layer), stream);
  }
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
  if (n == 0) return;
  const LayerDims& d = dims_;
  const DeviceQwen3Weights& target = target_->weights();
  EmbeddingGatherBf16(target.embed.data(), vocab(), d.hidden, blocks.tokens, blocks.rows,
                      s.layer.x.data(), stream);
  ClearAttentionRows(d, blocks.rows, s.layer, stream);
  for (int32_t layer = 0; layer < kv_.shape().num_layers; ++layer) {
    RunDeviceDecoderLayer(gemm_, weights_.layers[static_cast<size_t>(layer)], d, blocks, layer, kv_,
                          s.layer, stream);
  }
  // Rows 1 .. W−1 of each block: final norm (kept as the hidden output, as the CPU's
  // DraftOutput.hidden), the target's LM head, argmax.
  const int32_t candidates = n * (block - 1);
  GatherCandidateRows(s.layer.x.data(), n, block, d.hidden, out.hidden, stream);
  RmsNorm(out.hidden, weights_.final_norm.data(), out.hidden, candidates, d.hidden, d.eps, stream);
  ProjectBf16(gemm_, out.hidden, d.hidden, target.LmHead(), out.logits, vocab(), candidates, false,
              s.layer.gemm_in, stream);
  ArgmaxRows(out.logits, candidates, vocab(), out.tokens, stream);
}

DeviceDraftScratch::DeviceDraftScratch(const DeviceDFlashDrafter& drafter, int32_t max_requests,
                                       int32_t max_context_rows)
    : layer(drafter.dims(),
            std::max(int64_t{max_requests} * drafter.block_size(), int64_t{max_context_rows})),
      fc_in(Count(int64_t{max_context_rows} * drafter.feature_width())),
      max_requests_(max_requests),
      max_context_rows_(max_context_rows) {
  DSCALE_CHECK(max_requests >= 1 && max_context_rows >= 1);
}

}  // namespace dscale::cuda
