// The CUDA step backend (built only with the CUDA backend; cuda_backend_stub.cc otherwise).
// The target and the drafter run on the GPU: weights BF16, K/V in device memory. Per stage:
//   draft    the device drafter through its host adapter (DeviceDrafterHost): drafts, their
//            logits and hidden vectors come back to the host
//   prefill  DeviceTarget's forward through its host adapter
//   (the length decision runs on the host, in the engine: the draft logits it reads are on the
//   host already; EnqueueDvlDecision would need the drafter's outputs kept on the device)
//   verify + accept, when every request of the step is greedy and the drafter's block is W = 16:
//            one device pass on the bucket's fixed-address VerifyWorkspace (model/cuda/
//            verify_step.h: target forward over the packed rows → argmax → greedy acceptance →
//            outputs), eager on a workspace's first step and then replayed from a graph captured
//            for it; only the accepted counts and next tokens come back. Otherwise (a sampled
//            request, one asking for logprobs or with logit rules, another block width, no
//            drafter): DeviceTarget's forward returns the logits and the host prefix verifier runs,
//            since the device's sampled acceptance draws from a request's uniform stream and the
//            host's by position, and seeded outputs must not depend on the device. The device
//            greedy pass does not test logits for NaN or infinity (the host path fails such a
//            request)
//   commit   the committed rows' features (on the device after a device pass: those rows are
//            copied back) go to the drafter's adapter

#include "backend/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu_backend.h"
#include "core/dvl_shapes.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_available.h"
#include "kernels/cuda/graph.h"
#include "model/cuda/device_drafter.h"
#include "model/cuda/device_drafter_host.h"
#include "model/cuda/device_target.h"
#include "model/cuda/verify_step.h"

namespace dscale {
namespace {

// Requests per draft call and context rows per append that the device drafter's adapter runs at
// once; larger calls are split (device_drafter_host.h).
constexpr int32_t kDraftRequestsPerCall = 32;
constexpr int32_t kContextRowsPerCall = 512;

// Bytes the drafter's weights take on the device: matrices BF16, norm gains f32 (the gains are
// counted as BF16 too; they are a rounding error of the total).
int64_t DeviceDrafterBytes(const DFlashWeights& w) {
  size_t values = w.fc.size() + w.hidden_norm.size() + w.final_norm.size();
  for (const DecoderLayerWeights& l : w.layers) {
    values += l.input_norm.size() + l.qkv.size() + l.q_norm.size() + l.k_norm.size() +
              l.o_proj.size() + l.post_norm.size() + l.gate_up.size() + l.down.size();
  }
  return static_cast<int64_t>(values) * 2;
}

// The device copies of the models, and the drafter's stream.
struct DeviceModels {
  std::unique_ptr<cuda::DeviceTarget> target;
  cudaStream_t stream = nullptr;  // the drafter's
  std::optional<cuda::DeviceDFlashDrafter> drafter;
  std::optional<cuda::DeviceDrafterHost> drafter_host;

  DeviceModels() = default;
  DeviceModels(const DeviceModels&) = delete;
  DeviceModels& operator=(const DeviceModels&) = delete;
  ~DeviceModels() {
    drafter_host.reset();  // uses the drafter and the stream
    drafter.reset();
    if (stream != nullptr) static_cast<void>(cudaStreamDestroy(stream));
  }
};

// The device drafter computes the original DFlash layout only: DSpark drafters (their heads),
// newer drafters' causal or sliding-window layers and scaled embeddings run on the CPU backend.
Status CheckDeviceDraftLayout(const DFlashConfig& c) {
  if (c.is_dspark()) {
    return InvalidArgument(std::string("drafter config field \"architectures\": ") +
                           kDSparkArchitecture +
                           " (a DSpark drafter) runs on the CPU backend only: its Markov and "
                           "confidence heads have no device code (use --device cpu)");
  }
  for (int64_t layer = 0; layer < c.draft.num_hidden_layers; ++layer) {
    if (c.LayerAttention(layer) != DraftAttention{}) {
      return InvalidArgument(
          "drafter config field \"layer_types\" / \"is_causal\": draft layer " +
          std::to_string(layer) +
          " is causal or sliding-window, which the CUDA backend does not compute (use "
          "--device cpu)");
    }
  }
  if (c.input_embedding_scale != 1.0) {
    return InvalidArgument("drafter config field \"input_embedding_scale\": " +
                           std::to_string(c.input_embedding_scale) +
                           " is not 1, which the CUDA backend does not compute (use "
                           "--device cpu)");
  }
  return Status::Ok();
}

Result<std::unique_ptr<DeviceModels>> Upload(DecoderModel& host_target,
                                             DFlashDrafter* host_drafter) {
  if (host_drafter != nullptr) {
    DSCALE_RETURN_IF_ERROR(CheckDeviceDraftLayout(host_drafter->config()));
  }
  auto on = std::make_unique<DeviceModels>();
  DSCALE_ASSIGN_OR_RETURN(on->target, cuda::DeviceTarget::Upload(host_target));
  if (host_drafter != nullptr) {
    DSCALE_RETURN_IF_ERROR(cuda::CheckDeviceMemoryFits(DeviceDrafterBytes(host_drafter->weights()),
                                                       "the drafter's BF16 weights"));
    DSCALE_CUDA_CHECK(cudaStreamCreateWithFlags(&on->stream, cudaStreamNonBlocking));
    // The draft KV cache is sized when an engine binds its cache; one page until then.
    const KvCacheShape placeholder = on->target->KvShape(/*page_size=*/16, /*num_pages=*/1);
    on->drafter.emplace(host_drafter->config(),
                        cuda::UploadDFlashWeights(host_drafter->config(), host_drafter->weights()),
                        on->target->model(), placeholder);
    on->drafter_host.emplace(*on->drafter, kDraftRequestsPerCall, kContextRowsPerCall, on->stream);
  }
  return on;
}

// One bucket's device verification: its workspace and, from its second step, its graph.
struct DeviceVerify {
  std::unique_ptr<cuda::VerifyWorkspace> workspace;
  bool ran_eagerly = false;
  cuda::CapturedGraph graph;  // empty until the second step
};

bool SameShape(const cuda::VerifyShape& a, const cuda::VerifyShape& b) {
  return a.bucket == b.bucket && a.capacity == b.capacity && a.width == b.width &&
         a.pages_per_request == b.pages_per_request && a.page_size == b.page_size &&
         a.tile_rows == b.tile_rows && a.capture_layers == b.capture_layers;
}

class CudaBackend final : public StepBackend {
 public:
  explicit CudaBackend(std::unique_ptr<DeviceModels> models)
      : models_(std::move(models)),
        host_(*models_->target, models_->drafter_host ? &*models_->drafter_host : nullptr) {
    DSCALE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~CudaBackend() override {
    verifies_.clear();  // before the stream their graphs replay on
    static_cast<void>(cudaStreamDestroy(stream_));
  }
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return "cuda"; }
  TargetModel& target() override { return host_.target(); }
  Drafter* drafter() override { return host_.drafter(); }

  Result<TargetPass> Prefill(const StepBatch& chunks, PagedKvCache& cache,
                             ForwardOutput* out) override {
    return host_.Prefill(chunks, cache, out);
  }
  Status Draft(std::span<const DraftRequest> requests, const PagedKvCache& cache, int tile_rows,
               DraftOutput* out) override {
    return host_.Draft(requests, cache, tile_rows, out);
  }

  Result<TargetPass> Verify(const StepBatch& packed, std::span<const AcceptRequest> requests,
                            PagedKvCache& cache, ForwardOutput* out) override {
    if (!OnDevice(packed, requests)) return host_.Verify(packed, requests, cache, out);
    CheckForward(target().config(), packed, cache);
    const int32_t handle = VerifyFor(packed, cache);
    DeviceVerify& verify = *verifies_[static_cast<size_t>(handle)];
    verify.workspace->Stage(packed, stream_);
    RunStep(verify);
    const cuda::VerifyResults results = verify.workspace->ReadResults(stream_);
    TargetPass pass{.rows = &packed, .device_pass = handle};
    pass.device_results.resize(packed.spans().size());
    for (size_t i = 0; i < pass.device_results.size(); ++i) {
      pass.device_results[i] = {.accepted = results.accepted[i],
                                .next_token = results.next_token[i]};
    }
    return pass;
  }

  void Accept(const TargetPass& pass, std::span<const AcceptRequest> requests,
              std::span<Acceptance> outcomes) override {
    if (!pass.on_device()) return host_.Accept(pass, requests, outcomes);
    DSCALE_CHECK(outcomes.size() == pass.device_results.size());
    for (size_t i = 0; i < outcomes.size(); ++i) {
      outcomes[i] = {.result = pass.device_results[i], .status = Status::Ok()};
    }
  }

  void AppendContext(const TargetPass& pass, int32_t first, int32_t count) override {
    if (!pass.on_device()) return host_.AppendContext(pass, first, count);
    // The device pass kept every packed row's features: rows [first, first + count) come back.
    const StepBatch& rows = *pass.rows;
    const cuda::VerifyWorkspace& workspace =
        *verifies_[static_cast<size_t>(pass.device_pass)]->workspace;
    const int64_t width =
        static_cast<int64_t>(rows.capture_layers.size()) * target().config().hidden_size;
    DSCALE_CHECK(width > 0 && workspace.features() != nullptr);
    features_.resize(static_cast<size_t>(count * width));
    DSCALE_CUDA_CHECK(cudaMemcpyAsync(features_.data(), workspace.features() + first * width,
                                      features_.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                      stream_));
    DSCALE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    host_.AppendContextRows(rows, features_, first, count);
  }

 private:
  // Whether the step verifies and accepts in one device pass (see the top of this file).
  bool OnDevice(const StepBatch& packed, std::span<const AcceptRequest> requests) {
    if (drafter() == nullptr || drafter()->block_size() != dvl::kBlockWidth) return false;
    // The workspace's shape: N_bs ≤ M_bs ≤ W·N_bs.
    const size_t bucket = packed.span_storage().size(), capacity = packed.token_storage().size();
    if (capacity < bucket || capacity > bucket * dvl::kBlockWidth) return false;
    for (const AcceptRequest& r : requests) {
      if (!r.sampling->greedy() || r.logprobs || !r.sampling->rules.empty()) return false;
    }
    return true;
  }

  // The workspace for `packed`'s bucket shape on `cache`: the bucket's rows and spans with their
  // sentinels and tail (StepBatch storage), pages for the longest sequence a request can hold
  // (the context length and a block, at most the whole cache).
  // Returns its index in verifies_: the device pass's handle.
  int32_t VerifyFor(const StepBatch& packed, const PagedKvCache& cache) {
    if (cache.id() != cache_id_) {
      verifies_.clear();  // graphs hold the previous cache's device rows
      cache_id_ = cache.id();
    }
    const cuda::VerifyShape shape{.bucket = static_cast<int32_t>(packed.span_storage().size()),
                                  .capacity = static_cast<int64_t>(packed.token_storage().size()),
                                  .width = dvl::kBlockWidth,
                                  .pages_per_request = PagesPerRequest(cache.shape()),
                                  .page_size = cache.shape().page_size,
                                  .tile_rows = packed.tile_rows,
                                  .capture_layers = packed.capture_layers};
    for (size_t i = 0; i < verifies_.size(); ++i) {
      if (SameShape(verifies_[i]->workspace->shape(), shape)) return static_cast<int32_t>(i);
    }
    auto made = std::make_unique<DeviceVerify>();
    made->workspace = std::make_unique<cuda::VerifyWorkspace>(shape, models_->target->model());
    verifies_.push_back(std::move(made));
    return static_cast<int32_t>(verifies_.size() - 1);
  }

  int32_t PagesPerRequest(const KvCacheShape& kv) {
    const int64_t positions = target().config().max_position_embeddings + dvl::kBlockWidth;
    const int64_t pages = (positions + kv.page_size - 1) / kv.page_size;
    return static_cast<int32_t>(std::min<int64_t>(pages, kv.num_pages));
  }

  // The verification step: eager the first time, then captured once and replayed.
  void RunStep(DeviceVerify& verify) {
    // The step writes the verified rows' K/V as the target's Forward would, into the rows of
    // the cache its prefill bound.
    cuda::DeviceKvCache* kv = models_->target->kv();
    DSCALE_CHECK_MSG(kv != nullptr, "verification before any prefill");
    cuda::DeviceDecoderModel& model = models_->target->model();
    cuda::VerifyWorkspace& ws = *verify.workspace;
    const cuda::EnqueueWork work = [&model, kv, &ws](cudaStream_t s) {
      cuda::EnqueueVerifyStep(model, *kv, ws, s);
    };
    if (verify.graph.empty() && !verify.ran_eagerly) {
      work(stream_);
      verify.ran_eagerly = true;
      return;
    }
    if (verify.graph.empty()) verify.graph = cuda::CapturedGraph::Capture(stream_, work);
    verify.graph.Replay(stream_);
  }

  std::unique_ptr<DeviceModels> models_;
  CpuBackend host_;                // the host stages over the device models' adapters
  cudaStream_t stream_ = nullptr;  // the device verification's
  uint64_t cache_id_ = 0;          // the host cache the workspaces' graphs were captured for
  std::vector<std::unique_ptr<DeviceVerify>> verifies_;  // one per bucket shape
  std::vector<float> features_;                          // committed rows' features copied back
};

}  // namespace

Result<std::unique_ptr<StepBackend>> MakeCudaBackend(DecoderModel& host_target,
                                                     DFlashDrafter* host_drafter) {
  DSCALE_ASSIGN_OR_RETURN(std::unique_ptr<DeviceModels> models, Upload(host_target, host_drafter));
  return std::unique_ptr<StepBackend>(std::make_unique<CudaBackend>(std::move(models)));
}

}  // namespace dscale
