#pragma once
// Length policies: how many rows of each request's draft block are verified. Every mode runs
// the same step pipeline; only this decision differs.
//   none     1 row (the anchor): plain decoding, no drafter
//   dflash   W rows (the whole block): the native DFlash baseline
//   fixed:K  K rows (2..W): uniform truncation
//   dscale   k_i from the DVL allocator, Σ k_i = budget · W · N (or chosen per step: auto)
//   dspark   k_i from DSpark's scheduler over the DVL predictor's scores (the baseline)

#include <cstdint>
#include <string>

#include "core/status.h"

namespace dscale {

enum class SpecMode { kNone, kDFlash, kFixed, kDScale, kDSpark };

struct LengthPolicy {
  SpecMode mode = SpecMode::kNone;
  int32_t fixed_rows = 0;  // K for fixed:K

  // "none", "dflash", "fixed:K" (2 <= K <= 16), "dscale", "dspark".
  static Result<LengthPolicy> Parse(const std::string& text);
  std::string Name() const;
  bool UsesDrafter() const { return mode != SpecMode::kNone; }
  // dscale and dspark decide lengths from the DVL predictor's scores.
  bool UsesPredictor() const { return mode == SpecMode::kDScale || mode == SpecMode::kDSpark; }
  // dspark ranks drafts by the drafter's own confidence head where it has one (DSpark's
  // drafter), and by the predictor only otherwise (plan/planner_config.h, CheckPolicyInputs).
  bool RanksByConfidenceHead() const { return mode == SpecMode::kDSpark; }
  // dspark schedules by steps per second at each verified row count (budget/sps_table.h).
  bool UsesSpsTable() const { return mode == SpecMode::kDSpark; }
};

}  // namespace dscale
