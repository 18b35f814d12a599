#include "model/cuda/verify_step.h"

#include <algorithm>
#include <span>

#include "core/check.h"
#include "kernels/cuda/greedy_accept.h"
#include "kernels/cuda/output_builder.h"
#include "kernels/cuda/softmax.h"
#include "kernels/cuda/verify_spans.h"

namespace dscale::cuda {
namespace {

int64_t ResultInts(const VerifyShape& s) { return int64_t{s.bucket} * (3 + s.width); }

// Queues the copy of `from` (pageable: staged before the call returns) into `to`.
void CopyIn(DeviceBuffer<int32_t>& to, std::span<const int32_t> from, cudaStream_t stream) {
  DSCALE_CHECK_MSG(from.size() == to.size(), "verification input has the wrong size");
  if (from.empty()) return;
  DSCALE_CUDA_CHECK(
      cudaMemcpyAsync(to.data(), from.data(), to.bytes(), cudaMemcpyHostToDevice, stream));
}

std::vector<int32_t> Slice(const int32_t* base, int64_t begin, int64_t count) {
  return std::vector<int32_t>(base + begin, base + begin + count);
}

}  // namespace

void VerifyWorkspace::PinnedFree::operator()(int32_t* p) const {
  // Freeing can only fail once the device is lost; there is nothing left to do then.
  if (p != nullptr) static_cast<void>(cudaFreeHost(p));
}

VerifyWorkspace::VerifyWorkspace(const VerifyShape& shape, const DeviceDecoderModel& model)
    : shape_(shape),
      vocab_(model.config().vocab_size),
      tokens_(Count(shape.capacity)),
      positions_(Count(shape.capacity)),
      kv_slots_(Count(shape.capacity)),
      k_(Count(shape.bucket)),
      offsets_(Count(shape.bucket) + 1),
      ctx_len_(Count(shape.bucket)),
      page_tables_(Count(int64_t{shape.bucket} * shape.pages_per_request)),
      spans_(Count(shape.bucket)),
      scratch_(model.dims(), shape.capacity),
      logits_(Count(shape.capacity * model.config().vocab_size)),
      features_(Count(shape.capacity * static_cast<int64_t>(shape.capture_layers.size()) *
                      model.config().hidden_size)),
      argmax_(Count(shape.capacity)),
      results_(Count(ResultInts(shape))),
      host_k_(Count(shape.bucket)),
      host_offsets_(Count(shape.bucket) + 1),
      host_ctx_len_(Count(shape.bucket)),
      host_page_tables_(page_tables_.size()) {
  DSCALE_CHECK(shape.bucket >= 1 && shape.capacity >= shape.bucket && shape.page_size >= 1);
  DSCALE_CHECK(shape.capacity <= int64_t{shape.bucket} * shape.width);
  DSCALE_CHECK(shape.width >= 1 && shape.pages_per_request >= 1);
  for (const int32_t layer : shape.capture_layers) {
    DSCALE_CHECK_MSG(layer >= 0 && layer < model.config().num_hidden_layers,
                     "capture layer outside the target");
  }
  int32_t* pinned = nullptr;
  DSCALE_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&pinned),
                                   Count(ResultInts(shape)) * sizeof(int32_t)));
  host_results_.reset(pinned);
}

int64_t VerifyWorkspace::bytes() const {
  const size_t inputs = tokens_.bytes() + positions_.bytes() + kv_slots_.bytes() + k_.bytes() +
                        offsets_.bytes() + ctx_len_.bytes() + page_tables_.bytes();
  const size_t rest =
      spans_.bytes() + logits_.bytes() + features_.bytes() + argmax_.bytes() + results_.bytes();
  return static_cast<int64_t>(inputs + rest) + scratch_.bytes();
}

PackedRows VerifyWorkspace::packed() {
  return {.tokens = tokens_.data(),
          .positions = positions_.data(),
          .kv_slots = kv_slots_.data(),
          .k = k_.data(),
          .offsets = offsets_.data()};
}

void VerifyWorkspace::Stage(const StepBatch& packed, cudaStream_t stream) {
  const std::span<const StepSpan> spans = packed.span_storage();  // live spans, then sentinels
  DSCALE_CHECK_MSG(spans.size() == host_k_.size(), "the batch is not this bucket's");
  std::fill(host_page_tables_.begin(), host_page_tables_.end(), 0);
  for (size_t i = 0; i < spans.size(); ++i) {
    const StepSpan& s = spans[i];
    host_k_[i] = s.q_len;
    host_offsets_[i] = s.q_start;
    host_ctx_len_[i] = s.ctx_len;
    const int32_t pages = (s.ctx_len + s.q_len + shape_.page_size - 1) / shape_.page_size;
    DSCALE_CHECK_MSG(pages <= shape_.pages_per_request, "a span needs more pages than the shape");
    if (pages > 0) {
      std::copy_n(s.page_table, pages,
                  host_page_tables_.begin() + static_cast<int64_t>(i) * shape_.pages_per_request);
    }
  }
  host_offsets_.back() = packed.rows();  // M_live
  CopyIn(tokens_, packed.token_storage(), stream);
  CopyIn(positions_, packed.position_storage(), stream);
  CopyIn(kv_slots_, packed.kv_slot_storage(), stream);
  CopyIn(k_, host_k_, stream);
  CopyIn(offsets_, host_offsets_, stream);
  CopyIn(ctx_len_, host_ctx_len_, stream);
  CopyIn(page_tables_, host_page_tables_, stream);
}

void VerifyWorkspace::PoisonOutputs(cudaStream_t stream) {
  DSCALE_CUDA_CHECK(cudaMemsetAsync(logits_.data(), 0xff, logits_.bytes(), stream));
  if (features_.size() > 0) {
    DSCALE_CUDA_CHECK(cudaMemsetAsync(features_.data(), 0xff, features_.bytes(), stream));
  }
  DSCALE_CUDA_CHECK(cudaMemsetAsync(argmax_.data(), 0xff, argmax_.bytes(), stream));
  DSCALE_CUDA_CHECK(cudaMemsetAsync(results_.data(), 0xff, results_.bytes(), stream));
}

void VerifyWorkspace::QueueResultCopy(cudaStream_t stream) {
  DSCALE_CUDA_CHECK(cudaMemcpyAsync(host_results_.get(), results_.data(), results_.bytes(),
                                    cudaMemcpyDeviceToHost, stream));
}

VerifyResults VerifyWorkspace::TakeResults() const {
  const int32_t* r = host_results_.get();
  const int64_t n = shape_.bucket;
  return {.accepted = Slice(r, 0, n),
          .next_token = Slice(r, n, n),
          .committed = Slice(r, 2 * n, n),
          .tokens = Slice(r, 3 * n, n * shape_.width)};
}

VerifyResults VerifyWorkspace::ReadResults(cudaStream_t stream) {
  QueueResultCopy(stream);
  DSCALE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return TakeResults();
}

void EnqueueVerifyStep(DeviceDecoderModel& model, DeviceKvCache& kv, VerifyWorkspace& ws,
                       cudaStream_t stream) {
  const VerifyShape& s = ws.shape_;
  const auto rows = static_cast<int32_t>(s.capacity);
  BuildVerifySpans(ws.k_.data(), ws.offsets_.data(), ws.ctx_len_.data(), ws.page_tables_.data(),
                   s.pages_per_request, s.bucket, ws.spans_.data(), stream);
  const DeviceBatchView batch{.rows = rows,
                              .tokens = ws.tokens_.data(),
                              .positions = ws.positions_.data(),
                              .kv_slots = ws.kv_slots_.data(),
                              .live_rows = ws.offsets_.data() + s.bucket,  // M_live
                              .spans = ws.spans_.data(),
                              .num_spans = s.bucket,
                              .max_q_len = s.width,
                              .tile_rows = s.tile_rows};
  model.Forward(batch, s.capture_layers, kv, ws.scratch_,
                {.logits = ws.logits_.data(),
                 .features = ws.features_.size() > 0 ? ws.features_.data() : nullptr},
                stream);
  ArgmaxRows(ws.logits_.data(), rows, ws.vocab_, ws.argmax_.data(), stream);
  VerifyGreedyPacked(ws.argmax_.data(), ws.tokens_.data(), ws.k_.data(), ws.offsets_.data(),
                     s.bucket, ws.accepted(), ws.next_token(), stream);
  BuildVerifyOutputs(ws.tokens_.data(), ws.k_.data(), ws.offsets_.data(), ws.accepted(),
                     ws.next_token(), s.bucket, s.width, ws.committed(), ws.out_tokens(), stream);
}

}  // namespace dscale::cuda
