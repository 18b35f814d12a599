#pragma once
// Bounds for comparing an inflated model with its source (logit_bounds.h, applied to both).
//
// The small and the large model compute the same function in exact arithmetic, except that the
// large model's compensated gains (norms × √(d/D), k_norm × √(h/h')), ε' and rope_theta' are
// rounded to f32 (or double) once, and the constants' squares meet their target within 2^-30.
// Each is a relative perturbation of at most u = 2^-24 at one norm, so it is covered by counting
// every norm as one more float reduction (γ_K ≥ u for K ≥ 1). A logit of either model is then
// within its LogitErrorBounds of the exact common value, and the two are within the sum.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "model/decoder_model.h"
#include "model/dflash_drafter.h"
#include "model/logit_bounds.h"

namespace dscale::testing {

// Norms along a logit's path, each counted as one more reduction (see the header comment).
inline int NormRoundings(int64_t layers) { return static_cast<int>(4 * layers + 3); }

// |small − large| for the first `vocab` logits of a target row after `context` positions, both
// models caching K/V as `kv`. (The large model caches the small one's K and V values, so a BF16
// cache rounds the same values; each model's bound covers its own rounding of them.)
inline std::vector<double> TargetPairBounds(const DecoderModel& small, const DecoderModel& large,
                                            int64_t context, KvDtype kv) {
  const std::vector<double> a = TargetLogitBounds(small, context, kv);
  const DecoderConfig& c = large.config();
  const int64_t layers = c.num_hidden_layers;
  const double relative = (kReductionsPerLayer * layers + 1 + NormRoundings(layers)) *
                              FloatGamma(LongestReduction(c, context)) +
                          2.0 * layers * KvUnitRoundoff(kv);
  const std::vector<double> b =
      LogitErrorBounds(relative, large.weights().final_norm, large.weights().LmHead());
  std::vector<double> sum(a.size());
  for (size_t v = 0; v < a.size(); ++v) sum[v] = a[v] + b[v];
  return sum;
}

// The same for a draft row (the drafter's own layers and fc on top of the target's).
inline std::vector<double> DraftPairBounds(const DFlashDrafter& small_drafter,
                                           const DecoderModel& small, const DFlashDrafter& drafter,
                                           const DecoderModel& large, int64_t context, KvDtype kv) {
  const std::vector<double> a = DraftLogitBounds(small_drafter, small, context, kv);
  const DecoderConfig& t = large.config();
  const DFlashConfig& d = drafter.config();
  const int64_t layers = t.num_hidden_layers + d.draft.num_hidden_layers;
  const int64_t longest =
      std::max({LongestReduction(t, context), LongestReduction(d.draft, context + d.block_size),
                static_cast<int64_t>(d.target_layer_ids.size()) * t.hidden_size});
  const double relative =
      (kReductionsPerLayer * layers + 2 + NormRoundings(layers)) * FloatGamma(longest) +
      2.0 * layers * KvUnitRoundoff(kv);
  const std::vector<double> b =
      LogitErrorBounds(relative, drafter.weights().final_norm, large.weights().LmHead());
  std::vector<double> sum(a.size());
  for (size_t v = 0; v < a.size(); ++v) sum[v] = a[v] + b[v];
  return sum;
}

// The top-two gap of one row.
inline float TopGap(const float* row, int64_t n) {
  std::vector<float> copy(row, row + n);
  std::partial_sort(copy.begin(), copy.begin() + 2, copy.end(), std::greater<>());
  return copy[0] - copy[1];
}

}  // namespace dscale::testing
