#pragma once
// The decoder target (Qwen3, Llama, Qwen3-MoE; io/decoder_config.h) on the CPU backend: a
// StepBatch in; logits for its logit rows and the residual streams after its capture layers (the
// DFlash drafter's features) out.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/decoder_config.h"
#include "kv/paged_kv_cache.h"
#include "model/cpu_ops.h"
#include "model/decoder_layer.h"
#include "model/decoder_weights.h"
#include "model/target_model.h"

namespace dscale {

class DecoderModel final : public TargetModel {
 public:
  // Loads `dir`/config.json and the safetensors checkpoint in `dir`, holding the projections as
  // `weights` says (with kInt8 the pages of the quantised tensors leave resident memory) and
  // multiplying BF16 and int8 ones by activations as `activations` says.
  static Result<DecoderModel> Load(const std::string& dir,
                                   WeightsMode weights = WeightsMode::kAsStored,
                                   ActivationModes activations = {});
  DecoderModel(DecoderConfig config, DecoderWeights weights);

  const DecoderConfig& config() const override { return config_; }
  const DecoderWeights& weights() const { return weights_; }

  // How the projections take their activations (weight_matrix.h): BF16 ones f32 as they are or
  // each row rounded to BF16 once (`--activations`, gemm_bf16.h); int8 ones (`--weights int8`)
  // f32 as they are or each row quantised per 32 inputs (`--int8-activations`, gemm_int8.h).
  // f32 in both is the default here (the reference the parity tests hold). A DFlashDrafter on
  // this target follows it, in its own projections and in the target's LM head it drafts with.
  const ActivationModes& activations() const { return activations_; }
  void set_activations(ActivationModes activations) { activations_ = activations; }

  // KV cache geometry matching this model.
  KvCacheShape KvShape(int32_t page_size, int32_t num_pages) const override;

  // TargetModel::Forward, with the K/V rows in `cache`'s own store.
  Status Forward(const StepBatch& batch, PagedKvCache& cache, ForwardOutput* out) override;
  // All pending rows kept: the working state adopted; fewer: the kept rows' inputs replayed from
  // the committed state through the forward's own conv and delta-rule path (RecurrentRows).
  void CommitSequenceState(PagedKvCache& cache, int32_t seq, int32_t length) override;

 private:
  DecoderConfig config_;
  DecoderWeights weights_;
  LayerDims dims_;
  ActivationModes activations_;
  LayerScratch scratch_;  // grown on demand (no allocation in steady state)
};

}  // namespace dscale
