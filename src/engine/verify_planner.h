#pragma once
// The decision stage of a decode step: how many rows k_i of each request's draft block are
// verified, and the flat-pack of those rows into the bucket's fixed-address workspace
// (paper Algorithm 1). Every length policy goes through the same pack; only k differs:
//   none / dflash / fixed:K   k_i = 1 / W / K for every request
//   dscale                    features → predictor → prefix scores → seeds → budget
//                             adjustment to Σ k_i = verify_budget · W · N (W·N/2 by default)
// DVL never sees acceptance random numbers: it reads only the drafts.

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "dvl/flat_pack.h"
#include "dvl/predictor.h"
#include "model/drafter.h"
#include "spec/length_policy.h"

namespace dscale {

// Each request's whole draft block, [n, width] row-major: column 0 the anchor, then the
// candidates in draft order.
struct DraftBlocks {
  int64_t n = 0;
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<int32_t> kv_slots;
};

class VerifyPlanner {
 public:
  // `predictor` (required for dscale, which also needs W = 16) must outlive the planner.
  static Result<VerifyPlanner> Create(const LengthPolicy& policy, int32_t block,
                                      const dvl::Predictor* predictor, double verify_budget);

  // Block width the packer works with (W, or 2 for the anchor-only policy).
  int32_t width() const { return config_.width; }

  // Decides k for the n requests of `blocks` and packs them. `drafts` holds the drafter's
  // output for the same requests (unused by the uniform policies). The workspace stays valid
  // until the next call.
  Result<const dvl::PackWorkspace*> Plan(const DraftBlocks& blocks, const DraftOutput& drafts);

 private:
  VerifyPlanner(LengthPolicy policy, dvl::BucketConfig config, const dvl::Predictor* predictor);
  Status DecideWithPredictor(const DraftBlocks& blocks, const DraftOutput& drafts,
                             dvl::PackWorkspace* ws);

  LengthPolicy policy_;
  dvl::BucketConfig config_;
  const dvl::Predictor* predictor_;
  dvl::WorkspacePool pool_;
  std::vector<int32_t> k_;
  std::vector<float> features_;     // [n, 1735]
  std::vector<float> pred_logits_;  // [n, 15]
};

}  // namespace dscale
