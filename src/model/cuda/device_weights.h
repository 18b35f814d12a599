#pragma once
// Qwen3 target weights resident on the device: every matrix in BF16 (the checkpoints' own
// type), norm gains in f32. Same layout as DecoderWeights (model/decoder_weights.h): q/k/v stacked
// into one [q_dim + 2·kv_dim, hidden] matrix, gate/up into one [2·intermediate, hidden].

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "io/decoder_config.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/cuda_check.h"
#include "model/decoder_weights.h"

namespace dscale::cuda {

// A device layer's sparse MLP: none yet. Mixture-of-experts targets run on the CPU backend
// only (DeviceTarget::Upload refuses them), so a device layer's MLP is always the dense one and
// the model template's sparse branch (model/decoder_layer.h) never runs on the device.
struct DeviceSparseMlp {
  DeviceBuffer<Bf16> router;  // never allocated

  static bool empty() { return true; }
};

struct DeviceLayerWeights {
  DeviceBuffer<float> input_norm;  // [hidden]
  DeviceBuffer<Bf16> qkv;          // [q_dim + 2·kv_dim, hidden]
  DeviceBuffer<float> q_norm;      // [head_dim]
  DeviceBuffer<float> k_norm;      // [head_dim]
  DeviceBuffer<Bf16> o_proj;       // [hidden, q_dim]
  DeviceBuffer<float> post_norm;   // [hidden]
  DeviceBuffer<Bf16> gate_up;      // [2·intermediate, hidden]
  DeviceBuffer<Bf16> down;         // [hidden, intermediate]
  DeviceSparseMlp moe;

  // Device bytes held.
  int64_t bytes() const;
};

struct DeviceDecoderWeights {
  DeviceBuffer<Bf16> embed;  // [vocab, hidden]
  std::vector<DeviceLayerWeights> layers;
  DeviceBuffer<float> final_norm;  // [hidden]
  DeviceBuffer<Bf16> lm_head;      // [vocab, hidden]; empty when tied to the embedding

  const Bf16* LmHead() const { return lm_head.size() == 0 ? embed.data() : lm_head.data(); }
  // Device bytes held.
  int64_t bytes() const;
};

// Host values copied to the device (synchronous): matrices rounded to BF16 (exact for weights
// that came from a BF16 checkpoint), gains as they are. The drafter's upload
// (device_drafter.h) uses the same three.
DeviceBuffer<Bf16> UploadAsBf16(const std::vector<float>& values);
// A host weight matrix's elements as BF16 (BF16 blocks copied bit for bit).
DeviceBuffer<Bf16> UploadAsBf16(const WeightMatrix& matrix);
DeviceBuffer<float> UploadF32(const std::vector<float>& values);
DeviceLayerWeights UploadLayerWeights(const DecoderLayerWeights& weights);

// Copies host weights to the device, each matrix value rounded to BF16 (exact for weights that
// came from a BF16 checkpoint). Synchronous. Dense layers only (config.HasSparseLayers() false).
DeviceDecoderWeights UploadDecoderWeights(const DecoderConfig& config,
                                          const DecoderWeights& weights);

// Random weights made on the device (no host copy of the matrices): matrices uniform with the
// variance random_checkpoint.h uses (1/in per projection, 1 for the embedding, 9/hidden for an
// untied LM head), so activations stay O(1) through depth; norm gains 1. For benchmarks, where
// only shapes matter. Queued on `stream`. Dense layers only.
DeviceDecoderWeights RandomDeviceDecoderWeights(const DecoderConfig& config, uint64_t seed,
                                                cudaStream_t stream);

// Bytes RandomDeviceDecoderWeights / UploadDecoderWeights allocate for `config`.
int64_t DeviceDecoderWeightBytes(const DecoderConfig& config);

}  // namespace dscale::cuda
