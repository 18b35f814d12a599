#include "backend/cpu_backend.h"

#include "core/check.h"

namespace dscale {

Result<TargetPass> CpuBackend::Forward(const StepBatch& rows, PagedKvCache& cache,
                                       ForwardOutput* out) {
  DSCALE_RETURN_IF_ERROR(target_.Forward(rows, cache, out));
  return TargetPass{.rows = &rows, .out = out};
}

Result<TargetPass> CpuBackend::Prefill(const StepBatch& chunks, PagedKvCache& cache,
                                       ForwardOutput* out) {
  return Forward(chunks, cache, out);
}

Status CpuBackend::Draft(std::span<const DraftRequest> requests, const PagedKvCache& cache,
                         int tile_rows, DraftOutput* out) {
  DSCALE_CHECK_MSG(drafter_ != nullptr, "drafting needs a drafter");
  return drafter_->Draft(requests, cache, tile_rows, out);
}

Result<TargetPass> CpuBackend::Verify(const StepBatch& packed, std::span<const AcceptRequest>,
                                      PagedKvCache& cache, ForwardOutput* out) {
  return Forward(packed, cache, out);
}

void CpuBackend::Accept(const TargetPass& pass, std::span<const AcceptRequest> requests,
                        std::span<Acceptance> outcomes) {
  DSCALE_CHECK(!pass.on_device() && pass.out != nullptr);
  DSCALE_CHECK(outcomes.size() == requests.size());
  const int64_t vocab = target_.config().vocab_size;
  for (size_t i = 0; i < requests.size(); ++i) {
    const AcceptRequest& r = requests[i];
    const auto rows = static_cast<int64_t>(r.drafts.size()) + 1;
    const std::span<const float> logits =
        std::span(pass.out->logits).subspan(r.logits_row * vocab, rows * vocab);
    const SamplingParams& sampling = *r.sampling;
    Result<VerifyResult> accepted =
        sampling.greedy() ? VerifyGreedyChecked(logits, vocab, r.drafts)
        : r.draft_rows.present()
            ? VerifyWithDraftDistributionAt(logits, vocab, r.drafts, r.draft_rows, sampling,
                                            sampling.seed, r.first_position, &distribution_)
            : VerifySampledAt(logits, vocab, r.drafts, sampling, sampling.seed, r.first_position,
                              &probs_);
    if (accepted.ok()) {
      outcomes[i] = {.result = *accepted, .status = Status::Ok()};
    } else {
      outcomes[i] = {.result = {}, .status = accepted.status()};
    }
  }
}

void CpuBackend::AppendContext(const TargetPass& pass, int32_t first, int32_t count) {
  DSCALE_CHECK(!pass.on_device() && pass.out != nullptr);
  const int64_t width =
      static_cast<int64_t>(pass.rows->capture_layers.size()) * target_.config().hidden_size;
  AppendContextRows(*pass.rows, std::span(pass.out->features).subspan(first * width, count * width),
                    first, count);
}

void CpuBackend::AppendContextRows(const StepBatch& rows, std::span<const float> features,
                                   int32_t first, int32_t count) {
  DSCALE_CHECK_MSG(drafter_ != nullptr, "the draft context needs a drafter");
  drafter_->AppendContext({.features = features,
                           .positions = rows.positions().subspan(first, count),
                           .slots = rows.kv_slots().subspan(first, count)});
}

}  // namespace dscale
