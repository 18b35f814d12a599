#include "model/cuda/device_layer.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/kv_write.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rope.h"

namespace dscale::cuda {
namespace {

size_t Count(int64_t n) { return static_cast<size_t>(n); }

int64_t QkvCols(const LayerDims& d) { return d.q_dim() + 2 * d.kv_dim(); }

void AttentionHalf(const GemmContext& gemm, const DeviceLayerWeights& w, const LayerDims& d,
                   const DeviceBatchView& batch, int32_t layer, DeviceKvCache& kv,
                   DeviceForwardScratch& s, cudaStream_t stream) {
  const int32_t rows = batch.rows;
  const int64_t cols = QkvCols(d);
  RmsNorm(s.x.data(), w.input_norm.data(), s.normed.data(), rows, d.hidden, d.eps, stream);
  ProjectBf16(gemm, s.normed.data(), d.hidden, w.qkv.data(), s.qkv.data(), cols, rows, false,
              s.gemm_in, stream);
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
  params.causal = batch.causal;
  params.spans = batch.spans;
  params.num_spans = batch.num_spans;
  params.kv = kv.Layer(layer);
  PagedAttention(params, batch.max_q_len, batch.tile_rows, stream);
  ProjectBf16(gemm, s.attn.data(), d.q_dim(), w.o_proj.data(), s.x.data(), d.hidden, rows,
              /*accumulate=*/true, s.gemm_in, stream);
}

void MlpHalf(const GemmContext& gemm, const DeviceLayerWeights& w, const LayerDims& d, int32_t rows,
             DeviceForwardScratch& s, cudaStream_t stream) {
  RmsNorm(s.x.data(), w.post_norm.data(), s.normed.data(), rows, d.hidden, d.eps, stream);
  ProjectBf16(gemm, s.normed.data(), d.hidden, w.gate_up.data(), s.gate_up.data(),
              2 * d.intermediate, rows, false, s.gemm_in, stream);
  SwiGlu(s.gate_up.data(), s.act.data(), rows, d.intermediate, stream);
  ProjectBf16(gemm, s.act.data(), d.intermediate, w.down.data(), s.x.data(), d.hidden, rows,
              /*accumulate=*/true, s.gemm_in, stream);
}

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

void ProjectBf16(const GemmContext& gemm, const float* in, int64_t in_dim, const Bf16* w,
                 float* out, int64_t out_dim, int32_t rows, bool accumulate,
                 DeviceBuffer<Bf16>& gemm_in, cudaStream_t stream) {
  DSCALE_CHECK(int64_t{rows} * in_dim <= static_cast<int64_t>(gemm_in.size()));
  ConvertToBf16(in, gemm_in.data(), int64_t{rows} * in_dim, stream);
  LinearBf16(gemm, gemm_in.data(), w, out, rows, in_dim, out_dim, accumulate, stream);
}

void ClearAttentionRows(const LayerDims& dims, int32_t rows, DeviceForwardScratch& scratch,
                        cudaStream_t stream) {
  DSCALE_CHECK(rows >= 0 && rows <= scratch.max_rows());
  DSCALE_CUDA_CHECK(cudaMemsetAsync(scratch.attn.data(), 0,
                                    Count(int64_t{rows} * dims.q_dim()) * sizeof(float), stream));
}

void RunDeviceDecoderLayer(const GemmContext& gemm, const DeviceLayerWeights& w,
                           const LayerDims& dims, const DeviceBatchView& batch, int32_t layer,
                           DeviceKvCache& kv, DeviceForwardScratch& scratch, cudaStream_t stream) {
  DSCALE_CHECK(batch.rows >= 0 && batch.rows <= scratch.max_rows());
  DSCALE_CHECK(kv.row_floats() == dims.kv_dim());
  AttentionHalf(gemm, w, dims, batch, layer, kv, scratch, stream);
  MlpHalf(gemm, w, dims, batch.rows, scratch, stream);
}

}  // namespace dscale::cuda
