// The op table's rows for a hybrid target's (Qwen3.5) own ops: the Gated DeltaNet's causal
// conv, its delta-rule recurrence over a span, its gated RMSNorm, the gated attention output,
// and RoPE on part of each head. One CPU entry point each (one variant, the dispatched kernel).
//
// Bounds: the conv (K taps), the norms and the gate do O(1) float operations per output after
// an accurate reduction: 1e-5·|want| + 1e-5 (the conv's sums of K products cancel). The delta
// rule carries an f32 state over the span's rows, each row a decayed rank-one update of
// contraction norm ≤ 1 and dot products over key_dim: 1e-4·|want| + 1e-5, for the 17-row spans
// here.

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "kernel_test_util.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/delta_rule.h"
#include "kernels/cpu/linear_attention.h"
#include "kernels/cpu/rope.h"
#include "kernels/reference/reference_kernels.h"
#include "op_rows.h"

namespace dscale::testing {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kGatedNormEps = 1e-6f;

std::vector<OpVariant> DispatchOnly(OpFormat) { return {DispatchVariant()}; }

// The delta rule's column blocks in each vector width, and its dispatch.
std::vector<OpVariant> DeltaRuleVariants(OpFormat) {
  return {{"build_vectors", static_cast<int>(cpu::DeltaRuleVectors::kBuild), true},
          {"avx512", static_cast<int>(cpu::DeltaRuleVectors::kAvx512),
           cpu::CpuFeaturesInUse().Avx512()},
          DispatchVariant()};
}

std::vector<double> Within(const std::vector<float>& want, double rel) {
  return RelativeTolerance(want, rel, 1e-5);
}

OpCost Streamed(const OpShape& s, double read, double written) {
  return {.bytes = 4.0 * s.rows * (read + written), .madds = 0};
}

std::vector<float> Uniform(std::mt19937& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = u(rng);
  return values;
}

// ---- Causal conv: rows, in = channels, out = kernel K. x [rows, in], w = taps [in, K], y0 =
// [out rows, in (NaN) | the window before the span, K − 1 rows of in], the window updated.
OpCall MakeConv(const OpShape& s, OpFormat format, uint32_t seed) {
  std::mt19937 rng(seed);
  OpCall c{.shape = s, .format = format};
  c.x = RandomNormal(rng, s.rows * s.in, 0.0f, 1.0f);
  c.w = RandomNormal(rng, s.in * s.out, 0.0f, 0.5f);
  c.y0.assign(s.rows * s.in, kNaN);
  const std::vector<float> window = RandomNormal(rng, (s.out - 1) * s.in, 0.0f, 1.0f);
  c.y0.insert(c.y0.end(), window.begin(), window.end());
  return c;
}

void RunConv(const OpCall& c, float* y, bool reference) {
  const OpShape& s = c.shape;
  (reference ? ref::CausalConv1d : cpu::CausalConv1d)(c.x.data(), s.in, s.rows, s.in, s.out,
                                                      c.w.data(), y + s.rows * s.in, y, s.in);
}

// ---- Delta rule: rows, in = key_dim, out = value_dim, heads = value heads, kv_heads = key
// heads. x = [q | k] rows [rows, 2 · kv_heads · in]; v = [v | b | a] rows [rows, heads · out +
// 2 · heads]; w = [A_log | dt_bias] [2 · heads]; y0 = [out rows, heads · out (NaN) | the state
// before the span, heads · in · out], the state updated.
OpCall MakeDelta(const OpShape& s, OpFormat format, uint32_t seed) {
  std::mt19937 rng(seed);
  OpCall c{.shape = s, .format = format};
  c.x = RandomNormal(rng, s.rows * 2 * s.kv_heads * s.in, 0.0f, 1.0f);
  c.v = RandomNormal(rng, s.rows * (s.heads * s.out + 2 * s.heads), 0.0f, 1.0f);
  c.w = Uniform(rng, s.heads, -2.0f, 0.5f);
  const std::vector<float> dt_bias = Uniform(rng, s.heads, -1.0f, 1.0f);
  c.w.insert(c.w.end(), dt_bias.begin(), dt_bias.end());
  c.y0.assign(s.rows * s.heads * s.out, kNaN);
  const std::vector<float> state = RandomNormal(rng, s.heads * s.in * s.out, 0.0f, 0.5f);
  c.y0.insert(c.y0.end(), state.begin(), state.end());
  return c;
}

// `variant`: a DeltaRuleVectors, kDispatchVariant, or the reference (nullptr).
void RunDelta(const OpCall& c, float* y, const OpVariant* variant) {
  const OpShape& s = c.shape;
  const int64_t v_width = s.heads * s.out;
  const cpu::GatedDeltaSpan span{.qk = c.x.data(),
                                 .qk_stride = 2 * s.kv_heads * s.in,
                                 .v = c.v.data(),
                                 .v_stride = v_width + 2 * s.heads,
                                 .ba = c.v.data() + v_width,
                                 .ba_stride = v_width + 2 * s.heads,
                                 .a_log = c.w.data(),
                                 .dt_bias = c.w.data() + s.heads,
                                 .state = y + s.rows * v_width,
                                 .out = y,
                                 .out_stride = v_width,
                                 .rows = s.rows,
                                 .key_heads = s.kv_heads,
                                 .value_heads = s.heads,
                                 .key_dim = s.in,
                                 .value_dim = s.out};
  if (variant == nullptr) return ref::GatedDeltaRule(span);
  if (variant->id == kDispatchVariant) return cpu::GatedDeltaRule(span);
  cpu::GatedDeltaRuleIn(span, static_cast<cpu::DeltaRuleVectors>(variant->id));
}

// ---- Gated RMSNorm: in place over y0 [rows, heads · in]; x = z [rows, heads · in]; w = gain
// [in]. Sigmoid gate: in place over y0 [rows, in]; x = gate [rows, in].
OpCall MakeGated(const OpShape& s, OpFormat format, uint32_t seed) {
  std::mt19937 rng(seed);
  return {.shape = s,
          .format = format,
          .x = RandomNormal(rng, s.rows * s.heads * s.in, 0.0f, 3.0f),
          .w = RandomNormal(rng, s.in, 1.0f, 0.2f),
          .y0 = RandomNormal(rng, s.rows * s.heads * s.in, 0.0f, 2.0f)};
}

// ---- Partial RoPE: as the rope row, a quarter of each head (rounded down to even) rotated.
OpCall MakePartialRope(const OpShape& s, OpFormat format, uint32_t seed) {
  std::mt19937 rng(seed);
  OpCall c{.shape = s, .format = format};
  c.y0 = RandomNormal(rng, s.rows * s.heads * s.in, 0.0f, 2.0f);
  std::uniform_int_distribution<int32_t> position(0, 262143);
  for (int64_t r = 0; r < s.rows; ++r) c.ids.push_back(position(rng));
  c.rope = RopeSpec{.theta = 1e7, .rotary_dim = s.in / 4 / 2 * 2};  // Qwen3.5's θ and factor
  return c;
}

void RunPartialRope(const OpCall& c, float* x, bool reference) {
  const OpShape& s = c.shape;
  (reference ? ref::ApplyRope : cpu::ApplyRope)(x, c.ids.data(), s.rows, s.heads, s.in,
                                                s.heads * s.in, c.rope);
}

}  // namespace

OpSpec CausalConv1dOp() {
  return {
      .name = "causal_conv1d",
      .formats = {OpFormat::kF32},
      .test_shapes = {{.rows = 1, .in = 67, .out = 4},
                      {.rows = 3, .in = 131, .out = 3},
                      {.rows = 17, .in = 37, .out = 4},
                      {.rows = 5, .in = 9, .out = 1}},
      // Qwen3.5-4B's conv channels (2 · 16 · 128 + 32 · 128) and kernel.
      .model_shapes = {{.rows = 1, .in = 8192, .out = 4},
                       {.rows = 16, .in = 8192, .out = 4},
                       {.rows = 128, .in = 8192, .out = 4}},
      .bound = "1e-5·|want| + 1e-5",
      .make = MakeConv,
      .run_reference = [](const OpCall& c, float* y) { RunConv(c, y, true); },
      .tolerance = [](const OpCall&, const std::vector<float>& want) { return Within(want, 1e-5); },
      .variants = DispatchOnly,
      .run_variant = [](const OpCall& c, const OpVariant&, float* y) { RunConv(c, y, false); },
      .cost = [](const OpShape& s, OpFormat) { return Streamed(s, s.in, s.in); }};
}

OpSpec GatedDeltaRuleOp() {
  return {
      .name = "gated_delta_rule",
      .formats = {OpFormat::kF32},
      .test_shapes = {{.rows = 1, .in = 16, .out = 13, .heads = 6, .kv_heads = 3},
                      {.rows = 5, .in = 23, .out = 8, .heads = 3, .kv_heads = 3},
                      {.rows = 17, .in = 12, .out = 9, .heads = 4, .kv_heads = 2},
                      // a whole column block of either width, a vector and single columns
                      {.rows = 9, .in = 20, .out = 83, .heads = 4, .kv_heads = 2}},
      // Qwen3.5-4B's: 32 value heads over 16 key heads, 128 dims each.
      .model_shapes = {{.rows = 1, .in = 128, .out = 128, .heads = 32, .kv_heads = 16},
                       {.rows = 16, .in = 128, .out = 128, .heads = 32, .kv_heads = 16},
                       {.rows = 128, .in = 128, .out = 128, .heads = 32, .kv_heads = 16}},
      .bound = "1e-4·|want| + 1e-5",
      .make = MakeDelta,
      .run_reference = [](const OpCall& c, float* y) { RunDelta(c, y, nullptr); },
      .tolerance = [](const OpCall&, const std::vector<float>& want) { return Within(want, 1e-4); },
      .variants = DeltaRuleVariants,
      .run_variant = [](const OpCall& c, const OpVariant& v, float* y) { RunDelta(c, y, &v); },
      .cost =
          [](const OpShape& s, OpFormat) {
            // The state is read and written once per span; each row three multiply-adds (Sᵀk̂, the
            // update, the output) and a multiply (the decay) per state value.
            const double state = static_cast<double>(s.heads) * s.in * s.out;
            return OpCost{
                .bytes = 8.0 * state + 4.0 * s.rows * (2 * s.kv_heads * s.in + 2 * s.heads * s.out),
                .madds = 3.0 * state * s.rows};
          }};
}

OpSpec GatedRmsNormOp() {
  return {
      .name = "gated_rms_norm",
      .formats = {OpFormat::kF32},
      .test_shapes = {{.rows = 1, .in = 128, .heads = 3},
                      {.rows = 3, .in = 13, .heads = 6},
                      {.rows = 17, .in = 9, .heads = 2}},
      .model_shapes = {{.rows = 1, .in = 128, .heads = 32},
                       {.rows = 16, .in = 128, .heads = 32},
                       {.rows = 128, .in = 128, .heads = 32}},
      .bound = "1e-5·|want| + 1e-5",
      .make = MakeGated,
      .run_reference =
          [](const OpCall& c, float* x) {
            const OpShape& s = c.shape;
            ref::GatedRmsNorm(x, c.x.data(), s.heads * s.in, c.w.data(), s.rows, s.heads, s.in,
                              kGatedNormEps);
          },
      .tolerance = [](const OpCall&, const std::vector<float>& want) { return Within(want, 1e-5); },
      .variants = DispatchOnly,
      .run_variant =
          [](const OpCall& c, const OpVariant&, float* x) {
            const OpShape& s = c.shape;
            cpu::GatedRmsNorm(x, c.x.data(), s.heads * s.in, c.w.data(), s.rows, s.heads, s.in,
                              kGatedNormEps);
          },
      .cost = [](const OpShape& s,
                 OpFormat) { return Streamed(s, 2 * s.heads * s.in, s.heads * s.in); }};
}

OpSpec SigmoidGateOp() {
  return {
      .name = "sigmoid_gate",
      .formats = {OpFormat::kF32},
      .test_shapes = {{.rows = 1, .in = 257}, {.rows = 3, .in = 67}, {.rows = 17, .in = 131}},
      // Qwen3.5-4B's attention width (16 heads of 256).
      .model_shapes = {{.rows = 1, .in = 4096},
                       {.rows = 16, .in = 4096},
                       {.rows = 128, .in = 4096}},
      .bound = "1e-5·|want| + 1e-5",
      .make = MakeGated,
      .run_reference =
          [](const OpCall& c, float* x) {
            ref::SigmoidGate(x, c.x.data(), c.shape.in, c.shape.rows, c.shape.in);
          },
      .tolerance = [](const OpCall&, const std::vector<float>& want) { return Within(want, 1e-5); },
      .variants = DispatchOnly,
      .run_variant =
          [](const OpCall& c, const OpVariant&, float* x) {
            cpu::SigmoidGate(x, c.x.data(), c.shape.in, c.shape.rows, c.shape.in);
          },
      .cost = [](const OpShape& s, OpFormat) { return Streamed(s, 2 * s.in, s.in); }};
}

OpSpec PartialRopeOp() {
  return {
      .name = "partial_rope",
      .formats = {OpFormat::kF32},
      .test_shapes = {{.rows = 1, .in = 128, .heads = 3},
                      {.rows = 3, .in = 36, .heads = 5},
                      {.rows = 17, .in = 24, .heads = 2}},
      // Qwen3.5-4B's attention heads: 16 of 256, 64 dims rotated.
      .model_shapes = {{.rows = 1, .in = 256, .heads = 16},
                       {.rows = 16, .in = 256, .heads = 16},
                       {.rows = 128, .in = 256, .heads = 16}},
      .bound = "1e-5·|want| + 1e-5",
      .make = MakePartialRope,
      .run_reference = [](const OpCall& c, float* x) { RunPartialRope(c, x, true); },
      .tolerance = [](const OpCall&, const std::vector<float>& want) { return Within(want, 1e-5); },
      .variants = DispatchOnly,
      .run_variant = [](const OpCall& c, const OpVariant&,
                        float* x) { RunPartialRope(c, x, false); },
      .cost = [](const OpShape& s,
                 OpFormat) { return Streamed(s, s.heads * s.in, s.heads * s.in); }};
}

}  // namespace dscale::testing
