#pragma once
// One bucket's verification step on the device (paper Algorithm 2, the verify graph):
//
//   spans from (k, offsets) → target forward over the packed rows → argmax per row →
//   greedy acceptance → output builder
//
// on a VerifyWorkspace whose every buffer keeps its address for the workspace's lifetime (the
// paper's fixed-address workspace, Eq. graphinvariant). Launch sizes are the bucket's
// (N_bs spans, M_bs rows); what changes from step to step — the packed rows, lengths and
// offsets (so the live count and M_live), context lengths and page tables — is copied into the
// workspace from the bucket's StepBatch before each step (Stage), or written there by the DVL
// decision (EnqueueDvlDecision with packed() as its output). So EnqueueVerifyStep can be captured
// once per bucket (kernels/cuda/graph.h) and replayed; nothing inside it allocates or waits for the
// host, and only ReadResults, the state commit, copies anything back.
//
// Rows at or past M_live = offsets[N_bs] (tail placeholders) are computed but never stored in
// the KV cache and never accepted; sentinel requests (k = 0) commit nothing.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/dvl_shapes.h"
#include "core/step_batch.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dvl_pack.h"
#include "model/cuda/device_forward.h"
#include "model/cuda/device_kv_cache.h"

namespace dscale::cuda {

// Launch sizes of one bucket's verification.
struct VerifyShape {
  int32_t bucket = 0;    // N_bs: requests (attention spans) the step is launched for
  int64_t capacity = 0;  // M_bs: packed rows the target runs (DFlash W·N_bs, DScale W·N_bs/2)
  int32_t width = dvl::kBlockWidth;  // W ≥ every k_i: attention's max_q_len, output row width
  int32_t pages_per_request = 0;     // columns of the page-table array
  int32_t page_size = 16;            // KV positions per page
  int tile_rows = 16;                // attention tile height: 16 routed, 128 DFlash's default
  // Target layers whose residual streams are kept for the draft context (the drafter's
  // feature_layers, model/drafter.h), in this order; empty: none.
  std::vector<int32_t> capture_layers;
};

// What the state commit reads back.
struct VerifyResults {
  std::vector<int32_t> accepted;    // [bucket] drafts accepted (0 for sentinels)
  std::vector<int32_t> next_token;  // [bucket] the token after them (−1 for sentinels)
  std::vector<int32_t> committed;   // [bucket] accepted + 1 (0 for sentinels)
  std::vector<int32_t> tokens;      // [bucket, width] committed tokens, then −1
};

class VerifyWorkspace {
 public:
  // Allocates every buffer for `shape` and `model`'s sizes (forward scratch included).
  VerifyWorkspace(const VerifyShape& shape, const DeviceDecoderModel& model);

  const VerifyShape& shape() const { return shape_; }
  int64_t vocab() const { return vocab_; }
  // Device bytes reserved by this workspace (pinned host bytes not included).
  int64_t bytes() const;

  // The packed-row buffers, for EnqueueDvlDecision to write into.
  PackedRows packed();
  // Queues copies of a bucket's packed StepBatch (dvl::Pack: rows and tail [capacity], spans
  // and sentinels [bucket]) into the fixed addresses: rows, k = q_len, offsets = q_start,
  // ctx_len and each span's page table (sizes CHECKed against the shape).
  void Stage(const StepBatch& packed, cudaStream_t stream);

  // Fills the logits, features, argmaxes and results with 0xff bytes (queued on `stream`), so a
  // check after the next step cannot pass on values an earlier step left behind.
  void PoisonOutputs(cudaStream_t stream);

  // Queues the copy of the results into pinned host memory (one copy; graph-capturable).
  void QueueResultCopy(cudaStream_t stream);
  // Unpacks the results of the last completed QueueResultCopy (the caller synchronised).
  VerifyResults TakeResults() const;
  // QueueResultCopy, wait for the stream, TakeResults.
  VerifyResults ReadResults(cudaStream_t stream);

  // Device views for EnqueueVerifyStep and for tests.
  const float* logits() const { return logits_.data(); }    // [capacity, vocab]
  const int32_t* argmax() const { return argmax_.data(); }  // [capacity]
  // [capacity, capture_layers.size() · hidden]: every packed row's captured residual streams,
  // for the draft-context append of the rows the state commit keeps (null without capture).
  const float* features() const { return features_.size() > 0 ? features_.data() : nullptr; }

 private:
  friend void EnqueueVerifyStep(DeviceDecoderModel& model, DeviceKvCache& kv, VerifyWorkspace& ws,
                                cudaStream_t stream);
  struct PinnedFree {
    void operator()(int32_t* p) const;
  };
  int32_t* accepted() { return results_.data(); }
  int32_t* next_token() { return results_.data() + shape_.bucket; }
  int32_t* committed() { return results_.data() + 2 * int64_t{shape_.bucket}; }
  int32_t* out_tokens() { return results_.data() + 3 * int64_t{shape_.bucket}; }

  VerifyShape shape_;
  int64_t vocab_;
  // Inputs.
  DeviceBuffer<int32_t> tokens_, positions_, kv_slots_, k_, offsets_, ctx_len_, page_tables_;
  // Intermediates.
  DeviceBuffer<StepSpan> spans_;
  DeviceForwardScratch scratch_;
  DeviceBuffer<float> logits_;
  DeviceBuffer<float> features_;
  DeviceBuffer<int32_t> argmax_;
  // Results, one block: accepted [N_bs], next_token [N_bs], committed [N_bs], tokens [N_bs, W].
  DeviceBuffer<int32_t> results_;
  std::unique_ptr<int32_t, PinnedFree> host_results_;
  // Host staging of the per-request inputs Stage derives from the spans.
  std::vector<int32_t> host_k_, host_offsets_, host_ctx_len_, host_page_tables_;
};

// Queues one verification step of `ws`'s bucket on `stream` (see the top of this file): K/V
// of the live packed rows are stored into `kv`, and the results wait in `ws` for ReadResults.
void EnqueueVerifyStep(DeviceDecoderModel& model, DeviceKvCache& kv, VerifyWorkspace& ws,
                       cudaStream_t stream);

}  // namespace dscale::cuda
