#include "model/cuda/device_forward.h"

#include <utility>

#include "core/check.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/norm.h"

namespace dscale::cuda {
namespace {

size_t Count(int64_t n) { return static_cast<size_t>(n); }

// features[r, slot, :] = x[r, :]: one strided copy (rows of `hidden` floats, the destination
// rows num_slots · hidden apart).
void CaptureResidual(int64_t hidden, int32_t rows, int32_t slot, int32_t num_slots, const float* x,
                     float* features, cudaStream_t stream) {
  const auto row_bytes = Count(hidden) * sizeof(float);
  DSCALE_CUDA_CHECK(cudaMemcpy2DAsync(features + int64_t{slot} * hidden,
                                      row_bytes * Count(num_slots), x, row_bytes, row_bytes,
                                      Count(rows), cudaMemcpyDeviceToDevice, stream));
}

}  // namespace

DeviceQwen3Model::DeviceQwen3Model(Qwen3Config config, DeviceQwen3Weights weights)
    : config_(std::move(config)), dims_(LayerDims::From(config_)), weights_(std::move(weights)) {
  DSCALE_CHECK(static_cast<int64_t>(weights_.layers.size()) == config_.num_hidden_layers);
}

KvCacheShape DeviceQwen3Model::KvShape(int32_t page_size, int32_t num_pages) const {
  return {.num_layers = static_cast<int32_t>(config_.num_hidden_layers),
          .kv_heads = dims_.kv_heads,
          .head_dim = dims_.head_dim,
          .page_size = page_size,
          .num_pages = num_pages};
}

void DeviceQwen3Model::Forward(const DeviceBatchView& batch,
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
  if (rows == 0) return;
  const auto num_capture = static_cast<int32_t>(capture_layers.size());
  EmbeddingGatherBf16(weights_.embed.data(), config_.vocab_size, dims_.hidden, batch.tokens, rows,
                      scratch.x.data(), stream);
  ClearAttentionRows(dims_, rows, scratch, stream);
  for (int32_t layer = 0; layer < config_.num_hidden_layers; ++layer) {
    RunDeviceDecoderLayer(gemm_, weights_.layers[static_cast<size_t>(layer)], dims_, batch, layer,
                          kv, scratch, stream);
    for (int32_t slot = 0; slot < num_capture; ++slot) {
      if (capture_layers[static_cast<size_t>(slot)] == layer) {
        CaptureResidual(dims_.hidden, rows, slot, num_capture, scratch.x.data(), out.features,
                        stream);
      }
    }
  }
  if (out.logit_rows == nullptr) {
    RmsNorm(scratch.x.data(), weights_.final_norm.data(), scratch.normed.data(), rows, dims_.hidden,
            dims_.eps, stream);
    ProjectBf16(gemm_, scratch.normed.data(), dims_.hidden, weights_.LmHead(), out.logits,
                config_.vocab_size, rows, false, scratch.gemm_in, stream);
    return;
  }
  // The selected rows of the residual stream (a gather of rows of x, which is what an embedding
  // gather is), then the final norm into x, dead after the last layer, and the LM head from it.
  const int32_t n = out.num_logit_rows;
  DSCALE_CHECK(n >= 0 && n <= rows);
  if (n == 0) return;
  EmbeddingGather(scratch.x.data(), rows, dims_.hidden, out.logit_rows, n, scratch.normed.data(),
                  stream);
  RmsNorm(scratch.normed.data(), weights_.final_norm.data(), scratch.x.data(), n, dims_.hidden,
          dims_.eps, stream);
  ProjectBf16(gemm_, scratch.x.data(), dims_.hidden, weights_.LmHead(), out.logits,
              config_.vocab_size, n, false, scratch.gemm_in, stream);
}

}  // namespace dscale::cuda
