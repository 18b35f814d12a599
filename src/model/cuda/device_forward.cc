#include "model/cuda/device_forward.h"

#include <utility>

#include "core/check.h"

namespace dscale::cuda {
DeviceDecoderModel::DeviceDecoderModel(DecoderConfig config, DeviceDecoderWeights weights)
    : config_(std::move(config)), dims_(LayerDims::From(config_)), weights_(std::move(weights)) {
  DSCALE_CHECK(static_cast<int64_t>(weights_.layers.size()) == config_.num_hidden_layers);
}

KvCacheShape DeviceDecoderModel::KvShape(int32_t page_size, int32_t num_pages) const {
  return {.num_layers = static_cast<int32_t>(config_.num_hidden_layers),
          .kv_heads = dims_.kv_heads,
          .head_dim = dims_.head_dim,
          .page_size = page_size,
          .num_pages = num_pages};
}

void DeviceDecoderModel::Forward(const DeviceBatchView& batch,
                                 std::span<const int32_t> capture_layers, DeviceKvCache& kv,
                                 DeviceForwardScratch& scratch, const DeviceForwardOutputs& out,
                                 cudaStream_t stream) {
  const int32_t rows = batch.rows;
  DSCALE_CHECK(rows >= 0 && rows <= scratch.max_rows());
  DSCALE_CHECK_MSG(batch.causal, "the target attends causally");
  DSCALE_CHECK(kv.shape().num_layers == config_.num_hidden_layers);
  DSCALE_CHECK(kv.row_floats() == dims_.kv_dim());
  DSCALE_CHECK(out.logits != nullptr);
  DSCALE_CHECK(capture_layers.empty() || out.features != nullptr);
  for (const int32_t layer : capture_layers) {
    DSCALE_CHECK(layer >= 0 && layer < config_.num_hidden_layers);
  }
  DSCALE_CHECK(out.logit_rows == nullptr ||
               (out.num_logit_rows >= 0 && out.num_logit_rows <= rows));
  CudaOps ops(gemm_, scratch, stream);
  RunDecoderForward(ops, weights_, dims_, config_.vocab_size, batch, capture_layers, kv, scratch,
                    out);
}

}  // namespace dscale::cuda
