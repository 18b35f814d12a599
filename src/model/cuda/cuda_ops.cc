#include "model/cuda/cuda_ops.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/kv_write.h"

namespace dscale::cuda {

DeviceForwardScratch::DeviceForwardScratch(const LayerDims& d, int64_t max_rows,
                                           int64_t gemm_in_values)
    : x(Count(max_rows * d.hidden)),
      normed(Count(max_rows * d.hidden)),
      gemm_in(Count(
          std::max(max_rows * std::max({d.hidden, d.q_dim(), d.intermediate}), gemm_in_values))),
      qkv(Count(max_rows * (d.q_dim() + 2 * d.kv_dim()))),
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

float* CudaOps::Buffer(DeviceBuffer<float>& buffer, int64_t n) {
  DSCALE_CHECK(n >= 0 && n <= static_cast<int64_t>(buffer.size()));
  return buffer.data();
}

int32_t* CudaOps::IndexBuffer(DeviceBuffer<int32_t>& buffer, int64_t n) {
  DSCALE_CHECK(n >= 0 && n <= static_cast<int64_t>(buffer.size()));
  return buffer.data();
}

void CudaOps::RouteTopK(float* /*logits*/, int32_t /*rows*/, const MoeDims& /*m*/, int32_t* /*ids*/,
                        float* /*weights*/) {
  DSCALE_CHECK_MSG(false, "mixture-of-experts routing is not supported on the device yet");
}

void CudaOps::ExpertProducts(const float* /*normed*/, const DeviceSparseMlp& /*moe*/,
                             const LayerDims& /*d*/, int32_t /*rows*/, const int32_t* /*ids*/,
                             const float* /*weights*/, DeviceForwardScratch& /*s*/, float* /*x*/) {
  DSCALE_CHECK_MSG(false, "mixture-of-experts expert products are not supported on the device yet");
}

void CudaOps::CountSpanExperts(const BatchView& /*batch*/, const int32_t* /*ids*/,
                               const MoeDims& /*m*/, DeviceForwardScratch& /*s*/) {
  DSCALE_CHECK_MSG(false, "mixture-of-experts routing is not supported on the device yet");
}

void CudaOps::Gemm(const float* in, int64_t in_dim, const Bf16* w, float* out, int64_t out_dim,
                   int64_t rows, bool accumulate) const {
  DSCALE_CHECK(rows * in_dim <= static_cast<int64_t>(gemm_in_.size()));
  ConvertToBf16(in, gemm_in_.data(), rows * in_dim, stream_);
  LinearBf16(gemm_, gemm_in_.data(), w, out, rows, in_dim, out_dim, accumulate, stream_);
}

void CudaOps::StoreKv(DeviceKvCache& kv, int32_t layer, const BatchView& batch, const float* k,
                      const float* v, int64_t row_stride) const {
  DSCALE_CHECK(layer >= 0 && layer < kv.shape().num_layers);
  StoreKvRows(k, v, row_stride, batch.kv_slots, batch.rows, batch.live_rows, kv.row_floats(),
              kv.k(layer), kv.v(layer), stream_);
}

void CudaOps::Attention(const DeviceKvCache& kv, int32_t layer, const BatchView& batch,
                        const LayerDims& d, const float* q, int64_t q_stride, float* out) const {
  DSCALE_CHECK(kv.row_floats() == d.kv_dim());
  DSCALE_CHECK_MSG(batch.window == 0, "the CUDA attention has no sliding window");
  AttentionParams params;
  params.q = q;
  params.q_row_stride = q_stride;
  params.out = out;
  params.heads = d.heads;
  params.kv_heads = d.kv_heads;
  params.head_dim = d.head_dim;
  params.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.head_dim)));
  params.causal = batch.causal;
  params.spans = batch.spans;
  params.num_spans = batch.num_spans;
  params.kv = kv.Layer(layer);
  PagedAttention(params, batch.max_q_len, batch.tile_rows, stream_);
}

void CudaOps::ClearAttentionRows(DeviceForwardScratch& s, int32_t rows, int64_t q_dim) const {
  DSCALE_CHECK(rows >= 0 && rows <= s.max_rows());
  DSCALE_CUDA_CHECK(
      cudaMemsetAsync(s.attn.data(), 0, Count(int64_t{rows} * q_dim) * sizeof(float), stream_));
}

void CudaOps::CaptureRows(const float* x, int32_t rows, int64_t dim, int32_t slot,
                          int32_t num_slots, float* features) const {
  const size_t row_bytes = Count(dim) * sizeof(float);
  DSCALE_CUDA_CHECK(cudaMemcpy2DAsync(features + int64_t{slot} * dim, row_bytes * Count(num_slots),
                                      x, row_bytes, row_bytes, Count(rows),
                                      cudaMemcpyDeviceToDevice, stream_));
}

void CudaOps::GatherBlockTails(const float* x, int32_t blocks, int32_t block, int32_t first,
                               int32_t count, int64_t dim, float* out) const {
  DSCALE_CHECK(first + count <= block);
  const size_t row_bytes = Count(dim) * sizeof(float);
  const size_t piece = row_bytes * Count(count);
  DSCALE_CUDA_CHECK(cudaMemcpy2DAsync(out, piece, x + first * dim, row_bytes * Count(block), piece,
                                      Count(blocks), cudaMemcpyDeviceToDevice, stream_));
}

}  // namespace dscale::cuda
