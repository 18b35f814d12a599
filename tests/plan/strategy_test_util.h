#pragma once
// Hand-built decode steps for the length strategies' tests: draft blocks of chosen lengths,
// drafts with varied logits and hidden vectors, and a small predictor over them.

#include <cstdint>
#include <vector>

#include "core/step_batch.h"
#include "dvl/predictor.h"
#include "model/drafter.h"
#include "plan/length_strategy.h"

namespace dscale::plan_test {

inline constexpr int64_t kHidden = 8;  // drafter hidden width H
inline constexpr int64_t kVocab = 32;  // drafter vocabulary V

// One span per entry of `rows`: request i is sequence i at context 10 + i, with `rows[i]` rows
// (token 100·i + j, KV slot 16·i + j).
StepBatch MakeBlocks(const std::vector<int32_t>& rows);

// Drafts of n requests with W − 1 candidates each, their logits and hidden vectors drawn from
// `seed`.
DraftOutput MakeDrafts(int64_t n, uint32_t seed);

// A predictor over (kHidden, kVocab) with small random weights, so requests with different
// drafts get different scores.
dvl::Predictor MakePredictor(uint32_t seed);

// k for `in`'s requests, starting from 1 as VerifyPlanner hands it over.
std::vector<int32_t> DecideAll(LengthStrategy& strategy, const StrategyInput& in);

}  // namespace dscale::plan_test
