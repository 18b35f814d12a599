#include "backend/cpu_backend.h"

#include "core/check.h"

namespace dscale {

Status CpuBackend::Draft(std::span<const DraftRequest> requests, const PagedKvCache& cache,
                         int tile_rows, DraftOutput* out) {
  DSCALE_CHECK_MSG(drafter_ != nullptr, "drafting needs a drafter");
  return drafter_->Draft(requests, cache, tile_rows, out);
}

Result<StepBatch*> CpuBackend::Decide(VerifyPlanner& planner, const StepBatch& blocks,
                                      const DraftOutput& drafts, std::span<const uint8_t> drafted,
                                      double draft_s) {
  return planner.Plan(blocks, drafts, drafted, draft_s);
}

Status CpuBackend::Verify(const StepBatch& packed, std::span<const AcceptRequest>,
                          PagedKvCache& cache, ForwardOutput* out) {
  return target_.Forward(packed, cache, out);
}

void CpuBackend::Accept(const StepBatch& packed, const ForwardOutput& out,
                        std::span<const AcceptRequest> requests, std::span<Acceptance> outcomes) {
  const std::span<const StepSpan> spans = packed.spans();
  DSCALE_CHECK(requests.size() == spans.size() && outcomes.size() == spans.size());
  const int64_t vocab = target_.config().vocab_size;
  for (size_t i = 0; i < spans.size(); ++i) {
    const StepSpan& span = spans[i];
    const std::span<const float> logits =
        std::span(out.logits).subspan(int64_t{span.q_start} * vocab, int64_t{span.q_len} * vocab);
    const std::span<const int32_t> drafts =
        packed.tokens().subspan(span.q_start + 1, span.q_len - 1);
    const SamplingParams& sampling = *requests[i].sampling;
    Result<VerifyResult> accepted =
        sampling.greedy() ? VerifyGreedyChecked(logits, vocab, drafts)
                          : VerifySampledAt(logits, vocab, drafts, sampling, sampling.seed,
                                            requests[i].first_position, &probs_);
    if (accepted.ok()) {
      outcomes[i] = {.result = *accepted, .status = Status::Ok()};
    } else {
      outcomes[i] = {.result = {}, .status = accepted.status()};
    }
  }
}

void CpuBackend::AppendContext(const StepBatch& step, const ForwardOutput& out, int32_t first,
                               int32_t count) {
  DSCALE_CHECK_MSG(drafter_ != nullptr, "the draft context needs a drafter");
  const int64_t width =
      static_cast<int64_t>(step.capture_layers.size()) * target_.config().hidden_size;
  drafter_->AppendContext(
      {.features = std::span(out.features).subspan(first * width, count * width),
       .positions = step.positions().subspan(first, count),
       .slots = step.kv_slots().subspan(first, count)});
}

}  // namespace dscale
