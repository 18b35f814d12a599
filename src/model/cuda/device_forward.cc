#include "model/cuda/device_forward.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/check.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/kv_write.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rope.h"

namespace dscale::cuda {
namespace {

size_t Count(int64_t n) { return static_cast<size_t>(n); }

int64_t QkvCols(const LayerDims& d) { return d.q_dim() + 2 * d.kv_dim(); }

}  // namespace

DeviceForwardScratch::DeviceForwardScratch(const LayerDims& d, int64_t max_rows)
    : x(Count(max_rows * d.hidden)),
      normed(Count(max_rows * d.hidden)),
      gemm_in(Count(max_rows * std::max({d.hidden, d.q_dim(), d.intermediate}))),
      qkv(Count(max_rows * QkvCols(d))),
      attn(Count(max_rows * d.q_dim())),
      gate_up(Count(max_rows * 2 * d.intermediate)),
      act(Count(max_rows * d.intermediate)),
      max_rows_(max_rows) {
  DSCALE_CHECK(max_rows >= 1);
}

int64_t DeviceForwardScratch::bytes() const {
  return static_cast<int64_t>(x.bytes() + normed.bytes() + gemm_in.bytes() + qkv.bytes() +
                              attn.bytes() + gate_up.bytes() + act.bytes());
}

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

void DeviceQwen3Model::Project(const float* in, int64_t in_dim, const Bf16* w, float* out,
                               int64_t out_dim, int32_t rows, bool accumulate,
                               DeviceForwardScratch& s, cudaStream_t stream) {
  ConvertToBf16(in, s.gemm_in.data(), int64_t{rows} * in_dim, stream);
  LinearBf16(gemm_, s.gemm_in.data(), w, out, rows, in_dim, out_dim, accumulate, stream);
}

void DeviceQwen3Model::AttentionHalf(int32_t layer, const DeviceBatchView& batch, DeviceKvCache& kv,
                                     DeviceForwardScratch& s, cudaStream_t stream) {
  const DeviceLayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  const LayerDims& d = dims_;
  const int32_t rows = batch.rows;
  const int64_t cols = QkvCols(d);
  RmsNorm(s.x.data(), w.input_norm.data(), s.normed.data(), rows, d.hidden, d.eps, stream);
  Project(s.normed.data(), d.hidden, w.qkv.data(), s.qkv.data(), cols, rows, false, s, stream);
  // qkv row: [q heads | k heads | v heads]; q and k get per-head RMSNorm, then RoPE.
  float* q = s.qkv.data();
  float* k = q + d.q_dim();
  const float* v = k + d.kv_dim();
  HeadRmsNorm(q, w.q_norm.data(), rows, d.heads, d.head_dim, cols, d.eps, stream);
  HeadRmsNorm(k, w.k_norm.data(), rows, d.kv_heads, d.head_dim, cols, d.eps, stream);
  ApplyRope(q, batch.positions, rows, d.heads, d.head_dim, cols, d.rope_theta, stream);
  ApplyRope(k, batch.positions, rows, d.kv_heads, d.head_dim, cols, d.rope_theta, stream);
  StoreKvRows(k, v, cols, batch.kv_slots, rows, batch.live_rows, d.kv_dim(), kv.k(layer),
              kv.v(layer), stream);

  AttentionParams params;
  params.q = q;
  params.q_row_stride = cols;
  params.out = s.attn.data();
  params.heads = d.heads;
  params.kv_heads = d.kv_heads;
  params.head_dim = d.head_dim;
  params.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.head_dim)));
  params.causal = true;
  params.spans = batch.spans;
  params.num_spans = batch.num_spans;
  params.kv = kv.Layer(layer);
  PagedAttention(params, batch.max_q_len, batch.tile_rows, stream);
  Project(s.attn.data(), d.q_dim(), w.o_proj.data(), s.x.data(), d.hidden, rows,
          /*accumulate=*/true, s, stream);
}

void DeviceQwen3Model::MlpHalf(int32_t layer, int32_t rows, DeviceForwardScratch& s,
                               cudaStream_t stream) {
  const DeviceLayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  const LayerDims& d = dims_;
  RmsNorm(s.x.data(), w.post_norm.data(), s.normed.data(), rows, d.hidden, d.eps, stream);
  Project(s.normed.data(), d.hidden, w.gate_up.data(), s.gate_up.data(), 2 * d.intermediate, rows,
          false, s, stream);
  SwiGlu(s.gate_up.data(), s.act.data(), rows, d.intermediate, stream);
  Project(s.act.data(), d.intermediate, w.down.data(), s.x.data(), d.hidden, rows,
          /*accumulate=*/true, s, stream);
}

void DeviceQwen3Model::RunLayer(int32_t layer, const DeviceBatchView& batch, DeviceKvCache& kv,
                                DeviceForwardScratch& s, cudaStream_t stream) {
  AttentionHalf(layer, batch, kv, s, stream);
  MlpHalf(layer, batch.rows, s, stream);
}

void DeviceQwen3Model::CaptureResidual(int32_t rows, int32_t slot, int32_t num_slots,
                                       const float* x, float* features, cudaStream_t stream) const {
  // features[r, slot, :] = x[r, :]: one strided copy (rows of `hidden` floats, the destination
  // rows num_slots · hidden apart).
  const auto row_bytes = Count(dims_.hidden) * sizeof(float);
  DSCALE_CUDA_CHECK(cudaMemcpy2DAsync(features + int64_t{slot} * dims_.hidden,
                                      row_bytes * Count(num_slots), x, row_bytes, row_bytes,
                                      Count(rows), cudaMemcpyDeviceToDevice, stream));
}

void DeviceQwen3Model::Forward(const DeviceBatchView& batch,
                               std::span<const int32_t> capture_layers, DeviceKvCache& kv,
                               DeviceForwardScratch& scratch, const DeviceForwardOutputs& out,
                               cudaStream_t stream) {
  const int32_t rows = batch.rows;
  DSCALE_CHECK(rows >= 0 && rows <= scratch.max_rows());
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
  // Attention writes only the rows its spans cover; padding rows keep zeros, so every value
  // downstream stays finite and the same from run to run.
  DSCALE_CUDA_CHECK(cudaMemsetAsync(scratch.attn.data(), 0,
                                    Count(int64_t{rows} * dims_.q_dim()) * sizeof(float), stream));
  for (int32_t layer = 0; layer < config_.num_hidden_layers; ++layer) {
    RunLayer(layer, batch, kv, scratch, stream);
    for (int32_t slot = 0; slot < num_capture; ++slot) {
      if (capture_layers[static_cast<size_t>(slot)] == layer) {
        CaptureResidual(rows, slot, num_capture, scratch.x.data(), out.features, stream);
      }
    }
  }
  RmsNorm(scratch.x.data(), weights_.final_norm.data(), scratch.normed.data(), rows, dims_.hidden,
          dims_.eps, stream);
  Project(scratch.normed.data(), dims_.hidden, weights_.LmHead(), out.logits, config_.vocab_size,
          rows, false, scratch, stream);
}

}  // namespace dscale::cuda
