#pragma once
// The host implementation of the step's stages: the models behind TargetModel / Drafter (the
// loaded host models, or for a host-driven device model its adapter) and the host prefix
// verifier (greedy, and sampling with position-indexed uniforms: one-hot drafts, or drafts drawn
// from the drafter's distribution).

#include <vector>

#include "backend/step_backend.h"

namespace dscale {

class CpuBackend final : public StepBackend {
 public:
  // `drafter` may be null (the none policy). Both must outlive the backend.
  CpuBackend(TargetModel& target, Drafter* drafter) : target_(target), drafter_(drafter) {}

  std::string_view name() const override { return "cpu"; }
  TargetModel& target() override { return target_; }
  Drafter* drafter() override { return drafter_; }

  Result<TargetPass> Prefill(const StepBatch& chunks, PagedKvCache& cache,
                             ForwardOutput* out) override;
  Status Draft(std::span<const DraftRequest> requests, const PagedKvCache& cache, int tile_rows,
               DraftOutput* out) override;
  Result<TargetPass> Verify(const StepBatch& packed, std::span<const AcceptRequest> requests,
                            PagedKvCache& cache, ForwardOutput* out) override;
  // The target's Forward runs any spans: prompt chunks ride in the verify's pass.
  bool VerifyTakesPromptRows() const override { return true; }
  bool PassesOnHost() const override { return true; }
  void Accept(const TargetPass& pass, std::span<const AcceptRequest> requests,
              std::span<Acceptance> outcomes) override;
  void AppendContext(const TargetPass& pass, int32_t first, int32_t count) override;

  // Appends rows [first, first + count) of `rows` to the draft context, their features
  // [count, capture layers · hidden] given (the CUDA backend's device pass brings them back).
  void AppendContextRows(const StepBatch& rows, std::span<const float> features, int32_t first,
                         int32_t count);

 private:
  Result<TargetPass> Forward(const StepBatch& rows, PagedKvCache& cache, ForwardOutput* out);

  TargetModel& target_;
  Drafter* drafter_;
  std::vector<double> probs_;         // sampled acceptance's scratch distribution
  DistributionScratch distribution_;  // the same with the drafter's distribution
};

}  // namespace dscale
