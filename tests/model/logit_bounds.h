#pragma once
// How far a Qwen3 target's or a DFlash drafter's logits can move with the float32 evaluation
// order (GEMM blocking by row count, SIMD width, tile height, chunking): the first-order bound of
// float_bounds.h applied to the model's chain of reductions. Tests that compare logits from two
// computation orders, or that excuse a greedy divergence as a tie, use these instead of a
// measured constant, so they mean the same on every CPU.
//
// The bound: along the path from the embedding to a logit, R float reductions run in sequence
// (kReductionsPerLayer per decoder layer, then the LM head; the drafter adds its fc projection
// and its own layers), none longer than K terms. To first order each adds at most γ_K relative
// error to the terms it feeds on, and RMSNorm, RoPE, SiLU and softmax (accumulated in double)
// carry relative error through unchanged, so the final normed hidden state h is within R·γ_K
// relative error and logit v = h·W_v within R·γ_K·Σ_i|h_i·W_vi| of exact. Since h is the RMS
// normalised state times the gain g, ‖h‖₂ ≤ √H·max|g|, and Σ_i|h_i·W_vi| ≤ ‖h‖₂·‖W_v‖₂.
//
// A BF16 KV cache (kv/kv_dtype.h) adds one rounding to every K and V value a layer attends over,
// each within u_b = 2⁻⁸ relative: to first order the same as one more reduction per K and per V
// with γ_K replaced by u_b, so each layer adds 2·u_b to the relative error. "Exact" stays the
// model with exact K/V, so the bounds of an f32 and a BF16 cache compose: their logits agree to
// B_f32 + B_bf16.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "float_bounds.h"
#include "kv/kv_dtype.h"
#include "model/decoder_model.h"
#include "model/dflash_drafter.h"

namespace dscale::testing {

// Sequential reductions per decoder layer: q/k/v projection, attention scores, probabilities·V,
// output projection, gate/up projection, down projection.
inline constexpr int kReductionsPerLayer = 6;

// u_b: the relative rounding error of a value stored in a KV cache of `dtype`.
inline double KvUnitRoundoff(KvDtype dtype) { return dtype == KvDtype::kBf16 ? 0x1p-8 : 0.0; }

// B_v for every vocabulary row v of `lm_head` [vocab, hidden]: any float32 evaluation of logit v
// whose final normed hidden state is within `relative` error of exact is within B_v of the exact
// value (BF16 weights are widened exactly, so the same holds).
inline std::vector<double> LogitErrorBounds(double relative, const std::vector<float>& final_norm,
                                            const WeightMatrix& lm_head) {
  const auto hidden = static_cast<int64_t>(final_norm.size());
  double gain = 0.0;
  for (const float g : final_norm) gain = std::max(gain, std::fabs(double{g}));
  const double scale = relative * std::sqrt(double(hidden)) * gain;
  std::vector<double> bounds(static_cast<size_t>(lm_head.rows()));
  std::vector<float> row(static_cast<size_t>(hidden));
  for (int64_t v = 0; v < lm_head.rows(); ++v) {
    lm_head.RowToF32(v, row.data());
    double sum_sq = 0.0;
    for (const float w : row) sum_sq += double{w} * w;
    bounds[static_cast<size_t>(v)] = scale * std::sqrt(sum_sq);
  }
  return bounds;
}

// The longest reduction of a Qwen3 forward whose sequences reach `context` positions.
inline int64_t LongestReduction(const DecoderConfig& c, int64_t context) {
  return std::max({c.hidden_size, c.intermediate_size, c.q_dim(), context});
}

// The target's logits after `context` positions, its K/V cached as `kv`.
inline std::vector<double> TargetLogitBounds(const DecoderModel& target, int64_t context,
                                             KvDtype kv) {
  const DecoderConfig& c = target.config();
  const double relative =
      (kReductionsPerLayer * c.num_hidden_layers + 1) * FloatGamma(LongestReduction(c, context)) +
      2.0 * c.num_hidden_layers * KvUnitRoundoff(kv);
  return LogitErrorBounds(relative, target.weights().final_norm, target.weights().LmHead());
}

// The same for a target whose projections are int8 (--weights int8): the kernels form each term
// with one rounding more than an f32 kernel over the dequantised weights (gemm_int8.h), as if
// every reduction were one term longer.
inline std::vector<double> Int8TargetLogitBounds(const DecoderModel& target, int64_t context,
                                                 KvDtype kv) {
  return TargetLogitBounds(target, LongestReduction(target.config(), context) + 1, kv);
}

// A DFlash drafter's logits (through the target's LM head) over a draft context of `context`
// positions: the target's layers that produce the features, the fc projection over all of them,
// the draft layers, the LM head; both caches store K/V as `kv`.
inline std::vector<double> DraftLogitBounds(const DFlashDrafter& drafter,
                                            const DecoderModel& target, int64_t context,
                                            KvDtype kv) {
  const DecoderConfig& t = target.config();
  const DFlashConfig& d = drafter.config();
  const int64_t layers = t.num_hidden_layers + d.draft.num_hidden_layers;
  const int64_t fc_terms = static_cast<int64_t>(d.target_layer_ids.size()) * t.hidden_size;
  const int64_t longest = std::max(
      {LongestReduction(t, context), LongestReduction(d.draft, context + d.block_size), fc_terms});
  const double relative =
      (kReductionsPerLayer * layers + 2) * FloatGamma(longest) + 2.0 * layers * KvUnitRoundoff(kv);
  return LogitErrorBounds(relative, drafter.weights().final_norm, target.weights().LmHead());
}

// Two evaluations, each within B of exact, can order two logits differently only when their gap
// is at most 2·(B_a + B_b): a greedy choice whose top-two gap is within this is a float-noise tie.
inline float GreedyTieTolerance(const std::vector<double>& bounds) {
  return static_cast<float>(4.0 * *std::max_element(bounds.begin(), bounds.end()));
}

// The same decision on a CUDA device, which rounds every GEMM input to BF16: a last-bit
// difference in f32 accumulation can round an activation to the neighbouring BF16 value and move
// a logit by about 2⁻⁸ of that activation's contribution, up to ~1e-2 on the tiny test models
// (logit RMS ≈ 2). Top-two gaps within this are device ties.
inline constexpr float kBf16DeviceTieTolerance = 1e-2f;

}  // namespace dscale::testing
