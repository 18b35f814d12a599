#pragma once
// --verify-budget: how many draft rows dscale verifies per step.
//   a fraction f in (0, 1]  Σ k_i = round(f · W · N) every step (0.5: the paper's W·N/2)
//   auto                    per step, the M that maximises expected committed tokens per second
//                           under a step-cost model fitted online (budget/auto_budget.h); on a
//                           mixture of experts, draft rows priced by the experts they wake
//                           (budget/expert_cost_model.h)
//   auto-rows               the same with draft rows priced by their count alone (on a dense
//                           target the two are one)

#include <string>
#include <string_view>

#include "core/status.h"

namespace dscale::budget {

struct VerifyBudget {
  bool automatic = false;
  bool price_experts = true;  // automatic: a sparse target's rows priced by their experts
  double fraction = 0.5;      // used when !automatic

  // "auto", "auto-rows" or a number in (0, 1]; errors name --verify-budget.
  static Result<VerifyBudget> Parse(std::string_view text);
  std::string Name() const;  // "auto", "auto-rows" or the fraction, e.g. "0.5"
};

}  // namespace dscale::budget
