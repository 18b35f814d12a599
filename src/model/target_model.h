#pragma once
// The seam where the engine meets a target model: a StepBatch in; logits for its logit rows and
// the residual streams after its capture layers (the DFlash drafter's features) out.
// The CPU backend's DecoderModel (model/decoder_model.h) implements it, and so does the CUDA
// backend's DeviceTarget (model/cuda/device_target.h), which keeps weights and K/V on the device.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/expert_occupancy.h"
#include "core/status.h"
#include "core/step_batch.h"
#include "io/decoder_config.h"
#include "kv/paged_kv_cache.h"

namespace dscale {

struct ForwardOutput {
  std::vector<float> logits;    // [batch.logit_rows(), vocab]
  std::vector<float> features;  // [batch.rows(), capture_layers.size() · hidden], list order
  // A mixture of experts: the distinct experts the forward ran (each read its weights once),
  // summed over its sparse layers; 0 for a dense target.
  int64_t experts_run = 0;
  // And the experts the first rows of its spans woke (core/expert_occupancy.h); empty for a
  // dense target.
  ExpertOccupancy expert_occupancy;
};

class TargetModel {
 public:
  virtual ~TargetModel() = default;

  virtual const DecoderConfig& config() const = 0;

  // Geometry of the host PagedKvCache a caller makes for this model. A target that keeps its
  // K/V rows elsewhere (on the device) asks for num_layers = 0: the host cache then holds pages
  // and page tables only.
  virtual KvCacheShape KvShape(int32_t page_size, int32_t num_pages) const = 0;

  // Runs `batch` (causal, at batch.tile_rows): writes every row's K/V at its slot in `cache`,
  // then computes the outputs. Not thread-safe: a model owns its scratch buffers.
  virtual Status Forward(const StepBatch& batch, PagedKvCache& cache, ForwardOutput* out) = 0;

  // Sequence `seq` keeps its first `length` positions: a hybrid target's recurrent state moves
  // to `length`, which lies between its committed position and the end of the last forward's
  // span (kv/recurrent_state.h); the rows past it leave nothing behind. The engine calls it after
  // every forward's acceptance; a target without recurrent layers has nothing to do.
  virtual void CommitSequenceState(PagedKvCache& /*cache*/, int32_t /*seq*/, int32_t /*length*/) {}
};

// Where a request enters (Engine::CheckRequest, the command line): InvalidArgument naming `what`,
// the first id outside [0, vocab) and its position.
Status CheckTokenIds(std::span<const int32_t> ids, int64_t vocab, std::string_view what);

// The preconditions of every TargetModel::Forward, CHECKed (requests are validated where they
// enter): spans tile the rows and are reserved in `cache`, tokens lie in the vocabulary, logit
// rows and capture layers lie inside the batch and the model.
void CheckForward(const DecoderConfig& config, const StepBatch& batch, const PagedKvCache& cache);

}  // namespace dscale
