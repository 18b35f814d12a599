#pragma once
// The DFlash block-diffusion drafter (model/dflash_drafter.h) on the device, with the CPU
// drafter's contracts on device pointers: RunDFlashContext and RunDFlashDraft
// (model/dflash_forward.h) over CudaOps (cuda_ops.h, which states the numerics; the fc's input
// features are rounded to BF16 too).
//
// The drafter shares the target's embedding and LM head (as on the CPU) and keeps its own
// DeviceKvCache of the draft layers, slot-compatible with the target's cache: a committed
// token's draft K/V sit at the slot its target K/V use, so the host's PagedKvCache page tables
// address both.
//
// EnqueueAppendContext and EnqueueDraft only queue work on a DeviceDraftScratch sized once and
// on the caller's buffers: no allocation, no host synchronisation, so both can be captured into
// a CUDA graph (kernels/cuda/graph.h). DeviceDrafterHost (device_drafter_host.h) drives them
// from host data through the Drafter interface.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "io/dflash_config.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm_bf16.h"
#include "kv/paged_kv_cache.h"
#include "model/cuda/cuda_ops.h"
#include "model/cuda/device_forward.h"
#include "model/cuda/device_kv_cache.h"
#include "model/cuda/device_weights.h"
#include "model/decoder_layer.h"
#include "model/dflash_drafter.h"
#include "model/dflash_forward.h"

namespace dscale::cuda {

// DFlashWeights on the device: matrices BF16, norm gains f32.
struct DeviceDFlashWeights {
  DeviceBuffer<Bf16> fc;            // [hidden, K · target_hidden]
  DeviceBuffer<float> hidden_norm;  // [hidden]
  std::vector<DeviceLayerWeights> layers;
  DeviceBuffer<float> final_norm;  // [hidden]

  int64_t bytes() const;
};

// Copies host drafter weights to the device, each matrix value rounded to BF16 (exact for a
// BF16 checkpoint), with the target's upload helpers. Synchronous. Sizes are CHECKed against
// `config`.
DeviceDFlashWeights UploadDFlashWeights(const DFlashConfig& config, const DFlashWeights& weights);

// Committed rows whose target features enter the draft context (ContextRows, model/drafter.h,
// on device pointers).
struct DeviceContextRows {
  int32_t rows = 0;
  const float* features = nullptr;     // [rows, K · target hidden], target_layer_ids order
  const int32_t* positions = nullptr;  // [rows]
  const int32_t* kv_slots = nullptr;   // [rows]
  // Device scalar or null, as DeviceBatchView::live_rows: rows at or past it are not stored.
  const int32_t* live_rows = nullptr;
};

// Where EnqueueDraft writes, on the device (DraftOutputs, model/dflash_forward.h).
using DeviceDraftOutputs = DraftOutputs;

class DeviceDraftScratch;

class DeviceDFlashDrafter {
 public:
  // `target` must outlive the drafter (its embedding and LM head are shared). The draft KV
  // cache gets `target_kv`'s pages (page size, page count) with the drafter's layers and heads.
  // Creates the drafter's cuBLAS context on the current device. A DFlash drafter only: DSpark's
  // heads have no device code (the CUDA backend refuses such a drafter by name).
  DeviceDFlashDrafter(DFlashConfig config, DeviceDFlashWeights weights,
                      const DeviceDecoderModel& target, const KvCacheShape& target_kv);

  const DFlashConfig& config() const { return config_; }
  const LayerDims& dims() const { return dims_; }
  int32_t block_size() const { return config_.block_size; }  // W (DFlash: the input rows too)
  int64_t vocab() const { return target_->config().vocab_size; }
  // Width of the feature rows: K · target hidden.
  int64_t feature_width() const;
  // Re-allocates the draft K/V for a target cache of `target_kv`'s pages (page size, page
  // count), empty: what binding to a new engine's cache means (the CPU drafter's Bind makes a
  // fresh store likewise). Not while work on the old rows is queued; graphs captured before
  // hold the old rows' addresses and must be captured again.
  void ResetKv(const KvCacheShape& target_kv);
  // The draft layers' K/V, by slot.
  DeviceKvCache& kv() { return kv_; }
  const DeviceKvCache& kv() const { return kv_; }

  // Queues the projection of `context`'s features into the draft KV cache at its slots, roped
  // at its positions (DFlashDrafter::AppendContext). context.rows ≤ scratch.max_context_rows().
  void EnqueueAppendContext(const DeviceContextRows& context, DeviceDraftScratch& scratch,
                            cudaStream_t stream);

  // Queues one drafting step (DFlashDrafter::Draft) over `blocks`: blocks.num_spans requests
  // (≤ scratch.max_requests()), request i's block at rows i·W .. i·W + W − 1 (q_start = i·W,
  // q_len = W, rows = n·W), tokens [anchor, MASK × (W−1)] at positions ctx_len ..
  // ctx_len + W − 1 and the slots of those positions, blocks.causal false, max_q_len ≥ W.
  // The block's transient K/V are stored at its slots (the verification that follows
  // overwrites them). Writes `out` for all n requests. Anchors must be in the vocabulary:
  // the device cannot check them (embedding.h), the caller does.
  void EnqueueDraft(const DeviceBatchView& blocks, DeviceDraftScratch& scratch,
                    const DeviceDraftOutputs& out, cudaStream_t stream);

 private:
  DFlashConfig config_;
  LayerDims dims_;
  DeviceDFlashWeights weights_;
  const DeviceDecoderModel* target_;
  // Per draft layer, the k and v rows of its stacked qkv matrix: what the context goes through.
  std::vector<const Bf16*> context_kv_;
  DeviceKvCache kv_;
  GemmContext gemm_;
};

// Intermediates of the drafter's two steps, allocated once: up to max_requests blocks per
// draft and max_context_rows rows per context append.
class DeviceDraftScratch {
 public:
  DeviceDraftScratch(const DeviceDFlashDrafter& drafter, int32_t max_requests,
                     int32_t max_context_rows);

  int32_t max_requests() const { return max_requests_; }
  int32_t max_context_rows() const { return max_context_rows_; }
  int64_t bytes() const { return layer.bytes(); }

  // The draft layers' scratch, max(max_requests · W, max_context_rows) rows; the context
  // append uses its x (fc output), qkv (k/v rows) and gemm_in, which also holds
  // [max_context_rows, K · target hidden] BF16 features.
  DeviceForwardScratch layer;

 private:
  int32_t max_requests_;
  int32_t max_context_rows_;
};

}  // namespace dscale::cuda
