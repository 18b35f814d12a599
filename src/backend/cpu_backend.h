#pragma once
// The host implementation of the step's stages: the models behind TargetModel / Drafter (the
// loaded host models, or for a host-driven device model its adapter), VerifyPlanner for the
// decision, the host prefix verifier (greedy, and sampling with position-indexed uniforms).

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

  Status Draft(std::span<const DraftRequest> requests, const PagedKvCache& cache, int tile_rows,
               DraftOutput* out) override;
  Result<StepBatch*> Decide(VerifyPlanner& planner, const StepBatch& blocks,
                            const DraftOutput& drafts, std::span<const uint8_t> drafted,
                            double draft_s) override;
  Status Verify(const StepBatch& packed, std::span<const AcceptRequest> requests,
                PagedKvCache& cache, ForwardOutput* out) override;
  void Accept(const StepBatch& packed, const ForwardOutput& out,
              std::span<const AcceptRequest> requests, std::span<Acceptance> outcomes) override;
  void AppendContext(const StepBatch& step, const ForwardOutput& out, int32_t first,
                     int32_t count) override;

 private:
  TargetModel& target_;
  Drafter* drafter_;
  std::vector<double> probs_;  // sampled acceptance's scratch distribution
};

}  // namespace dscale
