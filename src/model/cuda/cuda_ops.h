#pragma once
// The CUDA backend's operations for the model templates (model/decoder_layer.h,
// model/decoder_forward.h, model/dflash_forward.h): the kernels of kernels/cuda on device
// pointers, queued on one stream, K/V in a DeviceKvCache. The CPU's are model/cpu_ops.h.
//
// Numerics: every GEMM takes BF16 weights and BF16-rounded activations and accumulates in f32
// (kernels/cuda/gemm_bf16.h); the residual stream, norms, RoPE, attention and K/V are f32.
// Everything only queues work on fixed buffers (graph-capturable): no allocation, no
// synchronisation, every per-step value read from device memory.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/check.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gemm_bf16.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/softmax.h"
#include "model/batch_view.h"
#include "model/cuda/device_kv_cache.h"
#include "model/cuda/device_weights.h"
#include "model/decoder_layer.h"

namespace dscale::cuda {

// A StepBatch's rows and spans in device memory.
using DeviceBatchView = BatchView;

// Intermediates of one forward of up to max_rows rows, allocated once.
class DeviceForwardScratch {
 public:
  // gemm_in holds at least `gemm_in_values` values too (a wider GEMM input than the layer's,
  // such as the drafter's features).
  DeviceForwardScratch(const LayerDims& dims, int64_t max_rows, int64_t gemm_in_values = 0);

  int64_t max_rows() const { return max_rows_; }
  int64_t bytes() const;

  DeviceBuffer<float> x;        // [rows, hidden] residual stream
  DeviceBuffer<float> normed;   // [rows, hidden]
  DeviceBuffer<Bf16> gemm_in;   // [rows, max(hidden, q_dim, intermediate)] GEMM input
  DeviceBuffer<float> qkv;      // [rows, q_dim + 2·kv_dim]
  DeviceBuffer<float> attn;     // [rows, q_dim]
  DeviceBuffer<float> gate_up;  // [rows, 2·intermediate]
  DeviceBuffer<float> act;      // [rows, intermediate]
  // For the model template's sparse MLP branch, which does not run on the device (see
  // DeviceSparseMlp): never allocated.
  DeviceBuffer<float> router_logits;
  DeviceBuffer<int32_t> route_ids;
  DeviceBuffer<float> route_weights;

 private:
  int64_t max_rows_;
};

class CudaOps {
 public:
  // Linear-attention layers and gated attention outputs are not computed on the device
  // (DeviceTarget::Upload refuses hybrid targets).
  static constexpr bool kLinearAttention = false;
  // Borrows all three for its lifetime; GEMM inputs are rounded into scratch.gemm_in.
  CudaOps(const GemmContext& gemm, DeviceForwardScratch& scratch, cudaStream_t stream)
      : gemm_(gemm), gemm_in_(scratch.gemm_in), stream_(stream) {}

  // The first `n` floats of `buffer` (CHECKed to fit: the scratch is sized once).
  static float* Buffer(DeviceBuffer<float>& buffer, int64_t n);
  static int32_t* IndexBuffer(DeviceBuffer<int32_t>& buffer, int64_t n);
  // Mixture-of-experts routing and expert products are not on the device yet: DeviceTarget
  // refuses such targets at load, so these are never reached (a CHECK failure if they are).
  static void RouteTopK(float* logits, int32_t rows, const MoeDims& m, int32_t* ids,
                        float* weights);
  static void ExpertProducts(const float* normed, const DeviceSparseMlp& moe, const LayerDims& d,
                             int32_t rows, const int32_t* ids, const float* weights,
                             DeviceForwardScratch& s, float* x);
  static void CountSpanExperts(const BatchView& batch, const int32_t* ids, const MoeDims& m,
                               DeviceForwardScratch& s);
  // out[rows, out_dim] (+)= bf16(in[rows, in_dim]) · w[out_dim, in_dim]ᵀ.
  void Gemm(const float* in, int64_t in_dim, const Bf16* w, float* out, int64_t out_dim,
            int64_t rows, bool accumulate) const;
  void Gemm(const float* in, int64_t in_dim, const DeviceBuffer<Bf16>& w, float* out,
            int64_t out_dim, int64_t rows, bool accumulate) const {
    Gemm(in, in_dim, w.data(), out, out_dim, rows, accumulate);
  }
  void RmsNorm(const float* x, const float* gain, float* y, int64_t rows, int64_t dim,
               float eps) const {
    cuda::RmsNorm(x, gain, y, rows, dim, eps, stream_);
  }
  void HeadRmsNorm(float* x, const float* gain, int64_t rows, int64_t heads, int64_t head_dim,
                   int64_t row_stride, float eps) const {
    cuda::HeadRmsNorm(x, gain, rows, heads, head_dim, row_stride, eps, stream_);
  }
  void Rope(float* x, const int32_t* positions, int64_t rows, int64_t heads, int64_t head_dim,
            int64_t row_stride, const RopeSpec& rope) const {
    ApplyRope(x, positions, rows, heads, head_dim, row_stride, rope, stream_);
  }
  void SwiGlu(const float* gate_up, float* out, int64_t rows, int64_t inter) const {
    cuda::SwiGlu(gate_up, out, rows, inter, stream_);
  }
  // x[r, :] = table[tokens[r], :] widened to f32.
  void Embed(const DeviceBuffer<Bf16>& table, int64_t vocab, int64_t dim, const int32_t* tokens,
             int32_t rows, float* x) const {
    EmbeddingGatherBf16(table.data(), vocab, dim, tokens, rows, x, stream_);
  }
  // Scaled embeddings (DFlashConfig::input_embedding_scale) are not computed on the device: the
  // CUDA backend refuses such drafters (backend/cuda_backend.cc), so only scale 1 reaches here.
  static void Scale(float* /*x*/, int64_t /*n*/, float scale) {
    DSCALE_CHECK_MSG(scale == 1.0f, "the CUDA backend does not scale embeddings");
  }
  // Rows before *batch.live_rows (all without it) into layer `layer` at their slots.
  void StoreKv(DeviceKvCache& kv, int32_t layer, const BatchView& batch, const float* k,
               const float* v, int64_t row_stride) const;
  // out [rows, q_dim] = paged attention of q over the batch's spans; rows no span covers are
  // not written.
  void Attention(const DeviceKvCache& kv, int32_t layer, const BatchView& batch, const LayerDims& d,
                 const float* q, int64_t q_stride, float* out) const;
  // Zeroes s.attn's first `rows` rows, once before a batch's layers: padding rows then keep
  // zeros, and every value downstream stays finite and the same from run to run.
  void ClearAttentionRows(DeviceForwardScratch& s, int32_t rows, int64_t q_dim) const;
  // features[r, slot, :] = x[r, :] (features [rows, num_slots, dim]): one strided copy.
  void CaptureRows(const float* x, int32_t rows, int64_t dim, int32_t slot, int32_t num_slots,
                   float* features) const;
  // out[i, :] = x[rows[i], :] for i < n (rows on the device).
  void GatherRows(const float* x, int32_t x_rows, int64_t dim, const int32_t* rows, int32_t n,
                  float* out) const {
    EmbeddingGather(x, x_rows, dim, rows, n, out, stream_);  // a gather of rows, as embedding's
  }
  // out = rows first .. first + count − 1 of each of `blocks` blocks of `block` rows of x, back
  // to back: one strided copy.
  void GatherBlockTails(const float* x, int32_t blocks, int32_t block, int32_t first, int32_t count,
                        int64_t dim, float* out) const;
  void Argmax(const float* x, int64_t rows, int64_t n, int32_t* out) const {
    ArgmaxRows(x, rows, n, out, stream_);
  }

 private:
  const GemmContext& gemm_;
  DeviceBuffer<Bf16>& gemm_in_;
  cudaStream_t stream_;
};

}  // namespace dscale::cuda
