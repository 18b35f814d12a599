#pragma once
// The Qwen3 target on the device: the contract of DecoderModel::Forward (model/decoder_model.h)
// on device pointers, with BF16 weights resident on the device — RunDecoderForward
// (model/decoder_forward.h) over CudaOps (cuda_ops.h, which states the numerics).
//
// Forward only queues work: no allocation, no synchronisation, every address fixed by the
// caller's buffers and every per-step value (tokens, spans, the live row count) read from
// device memory — so a caller can capture it into a CUDA graph (kernels/cuda/graph.h) and
// replay it with new inputs copied into the same buffers.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "io/decoder_config.h"
#include "kernels/cuda/gemm_bf16.h"
#include "model/cuda/cuda_ops.h"
#include "model/cuda/device_kv_cache.h"
#include "model/cuda/device_weights.h"
#include "model/decoder_forward.h"
#include "model/decoder_layer.h"

namespace dscale::cuda {

// Where Forward writes, on the device (TargetOutputs, model/decoder_forward.h).
using DeviceForwardOutputs = TargetOutputs;

class DeviceDecoderModel {
 public:
  // Creates the model's cuBLAS context on the current device.
  DeviceDecoderModel(DecoderConfig config, DeviceDecoderWeights weights);

  const DecoderConfig& config() const { return config_; }
  const LayerDims& dims() const { return dims_; }
  const DeviceDecoderWeights& weights() const { return weights_; }

  // KV cache geometry matching this model.
  KvCacheShape KvShape(int32_t page_size, int32_t num_pages) const;

  // Queues the forward of `batch` on `stream`: stores every live row's K/V into `kv` at its
  // slot, then writes out.logits for every row (or those out.logit_rows names) and, for each layer
  // in capture_layers (0-based, in list order), the residual stream after it into out.features.
  // batch.rows ≤ scratch.max_rows(); batch.causal (the target attends causally). Bad layers or
  // sizes are CHECK failures (the host validated the batch). Not thread-safe (one cuBLAS handle).
  void Forward(const DeviceBatchView& batch, std::span<const int32_t> capture_layers,
               DeviceKvCache& kv, DeviceForwardScratch& scratch, const DeviceForwardOutputs& out,
               cudaStream_t stream);

 private:
  DecoderConfig config_;
  LayerDims dims_;
  DeviceDecoderWeights weights_;
  GemmContext gemm_;
};

}  // namespace dscale::cuda
