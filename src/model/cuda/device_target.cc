#include "model/cuda/device_target.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/check.h"
#include "kernels/cuda/device_available.h"
#include "model/cuda/device_batch.h"

namespace dscale::cuda {
namespace {

// Queues the copy of the first host.size() values of `device` into `host`.
void CopyBack(const float* device, std::vector<float>& host, cudaStream_t stream) {
  if (host.empty()) return;
  DSCALE_CUDA_CHECK(cudaMemcpyAsync(host.data(), device, host.size() * sizeof(float),
                                    cudaMemcpyDeviceToHost, stream));
}

}  // namespace

Result<std::unique_ptr<DeviceTarget>> DeviceTarget::Upload(const DecoderModel& host) {
  if (host.config().HasLinearAttentionLayers()) {
    return InvalidArgument("--device cuda: the target (" +
                           std::string(ModelFamilyName(host.config().family)) +
                           ") has linear_attention (Gated DeltaNet) layers, which the device does "
                           "not compute yet (use --device cpu)");
  }
  const std::string& unavailable = CudaUnavailableReason();
  if (!unavailable.empty()) {
    return InvalidArgument("--device cuda: no usable CUDA device: " + unavailable);
  }
  if (host.config().HasSparseLayers()) {
    return InvalidArgument(
        "--device cuda: the target is a mixture of experts (" +
        std::string(ModelFamilyName(host.config().family)) +
        "), whose sparse MLP layers are not supported on the device yet (use --device cpu)");
  }
  DSCALE_RETURN_IF_ERROR(
      CheckDeviceMemoryFits(DeviceDecoderWeightBytes(host.config()), "the target's BF16 weights"));
  return std::make_unique<DeviceTarget>(host.config(),
                                        UploadDecoderWeights(host.config(), host.weights()));
}

DeviceTarget::DeviceTarget(DecoderConfig config, DeviceDecoderWeights weights)
    : model_(std::move(config), std::move(weights)) {
  DSCALE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

DeviceTarget::~DeviceTarget() {
  if (stream_ != nullptr) static_cast<void>(cudaStreamDestroy(stream_));
}

KvCacheShape DeviceTarget::KvShape(int32_t page_size, int32_t num_pages) const {
  KvCacheShape shape = model_.KvShape(page_size, num_pages);
  shape.num_layers = 0;
  return shape;
}

Status DeviceTarget::Bind(const PagedKvCache& cache) {
  if (kv_ && bound_cache_ == cache.id()) return Status::Ok();
  DSCALE_CHECK_MSG(!dropped_caches_.contains(cache.id()),
                   "DeviceTarget: this KV cache's device rows were given up for another cache");
  if (kv_) dropped_caches_.insert(bound_cache_);
  kv_.reset();  // free the old rows before sizing the new ones
  const KvCacheShape shape = model_.KvShape(cache.shape().page_size, cache.shape().num_pages);
  DSCALE_RETURN_IF_ERROR(CheckDeviceMemoryFits(
      DeviceKvCache::BytesFor(shape),
      "the KV cache (" + std::to_string(cache.num_slots()) + " positions) on the device"));
  kv_.emplace(shape);
  bound_cache_ = cache.id();
  return Status::Ok();
}

void DeviceTarget::Reserve(int32_t rows, int64_t feature_width) {
  if (!scratch_ || scratch_->max_rows() < rows) {
    // Grow geometrically so a run of slowly growing batches allocates a few times only.
    const int64_t capacity = std::max<int64_t>(rows, scratch_ ? 2 * scratch_->max_rows() : 0);
    scratch_ = std::make_unique<DeviceForwardScratch>(model_.dims(), capacity);
    logits_ = DeviceBuffer<float>(static_cast<size_t>(capacity * config().vocab_size));
    logit_rows_ = DeviceBuffer<int32_t>(static_cast<size_t>(capacity));
    features_ = DeviceBuffer<float>();  // resized below for the new capacity
  }
  const auto want = static_cast<size_t>(scratch_->max_rows() * feature_width);
  if (features_.size() < want) features_ = DeviceBuffer<float>(want);
}

Status DeviceTarget::Forward(const StepBatch& batch, PagedKvCache& cache, ForwardOutput* out) {
  CheckForward(config(), batch, cache);
  const int32_t rows = batch.rows();
  const auto num_capture = static_cast<int64_t>(batch.capture_layers.size());
  const int64_t hidden = config().hidden_size;
  out->features.assign(static_cast<size_t>(rows * num_capture * hidden), 0.0f);
  out->logits.clear();
  if (rows == 0) return Status::Ok();
  DSCALE_RETURN_IF_ERROR(Bind(cache));
  Reserve(rows, num_capture * hidden);

  // The copies into `staged` are synchronous, so the batch is on the device before the forward
  // is queued; `staged` lives until the results are back. logit_rows_ is never empty here
  // (Reserve), so a batch asking for no logits does not read as "every row".
  const DeviceBatch staged(batch, cache);
  const std::span<const int32_t> logit_rows = batch.logit_rows();
  const auto num_logit_rows = static_cast<int32_t>(logit_rows.size());
  DSCALE_CHECK(num_logit_rows <= rows);
  if (num_logit_rows > 0) {
    DSCALE_CUDA_CHECK(cudaMemcpyAsync(logit_rows_.data(), logit_rows.data(),
                                      logit_rows.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                                      stream_));
  }
  model_.Forward(staged.view(), batch.capture_layers, *kv_, *scratch_,
                 {.logits = logits_.data(),
                  .features = num_capture > 0 ? features_.data() : nullptr,
                  .logit_rows = logit_rows_.data(),
                  .num_logit_rows = num_logit_rows},
                 stream_);
  out->logits.resize(static_cast<size_t>(num_logit_rows * config().vocab_size));
  CopyBack(logits_.data(), out->logits, stream_);
  CopyBack(features_.data(), out->features, stream_);
  DSCALE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return Status::Ok();
}

}  // namespace dscale::cuda
