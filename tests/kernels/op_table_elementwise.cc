// The op table's rows for the forward's row-wise and elementwise ops: RMSNorm, per-head
// RMSNorm, RoPE, the SwiGLU gate, SiLU, the GRU update (the recurrent head), the embedding
// gather, softmax, argmax, the int8 activation quantiser and a mixture of experts' router. Each has
// one CPU entry point (its vectors are the build's), so each has one variant, the dispatched
// kernel. Shapes: rows tokens, `in` the width each row is normalised, rotated or gated over.
//
// Bounds: the norms, RoPE, SiLU, SwiGLU and the GRU update do O(1) float operations per output
// after an accurate reduction, within 1e-5 relative plus 1e-6 (kernel_test_util.h); softmax
// within 1e-6 absolute (probabilities); the gather, argmax and quantiser exactly; the router's
// experts exactly and its weights within 1e-6 (probabilities).

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "kernel_test_util.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/expert_router.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/recurrent.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/softmax.h"
#include "kernels/reference/reference_kernels.h"
#include "op_rows.h"

namespace dscale::testing {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<OpVariant> DispatchOnly(OpFormat) { return {DispatchVariant()}; }

std::vector<double> Elementwise(const OpCall&, const std::vector<float>& want) {
  return RelativeTolerance(want, kElementwiseRelTol, kElementwiseAbsTol);
}
std::vector<double> Exact(const OpCall&, const std::vector<float>& want) {
  return std::vector<double>(want.size(), 0.0);
}

// Bytes of a row-wise op that reads `read` and writes `written` floats per row.
OpCost Streamed(const OpShape& s, double read, double written) {
  return {.bytes = 4.0 * s.rows * (read + written), .madds = 0};
}

// Odd widths across the vector widths, 1, 3 and 17 rows; Qwen3-1.7B's hidden width.
const std::vector<OpShape> kRowShapes = {
    {.rows = 1, .in = 257}, {.rows = 3, .in = 67}, {.rows = 17, .in = 131}};
const std::vector<OpShape> kHiddenShapes = {
    {.rows = 1, .in = 2048}, {.rows = 16, .in = 2048}, {.rows = 128, .in = 2048}};

// ---- RMSNorm: x [rows, in], w [in] (the norm weight), y0 [rows, in].
OpCall MakeRmsNorm(const OpShape& s, OpFormat format, uint32_t seed) {
  std::mt19937 rng(seed);
  return {.shape = s,
          .format = format,
          .x = RandomNormal(rng, s.rows * s.in, 0.5f, 3.0f),
          .w = RandomNormal(rng, s.in, 1.0f, 0.2f),
          .y0 = std::vector<float>(s.rows * s.in, kNaN)};
}

// ---- Per-head RMSNorm, RoPE: y0 [rows, heads · in] in place, each head `in` values.
OpCall MakeHeads(const OpShape& s, OpFormat format, uint32_t seed) {
  std::mt19937 rng(seed);
  OpCall c{.shape = s, .format = format};
  c.y0 = RandomNormal(rng, s.rows * s.heads * s.in, 0.0f, 2.0f);
  c.w = RandomNormal(rng, s.in, 1.0f, 0.2f);
  std::uniform_int_distribution<int32_t> position(0, 40960);
  for (int64_t r = 0; r < s.rows; ++r) c.ids.push_back(position(rng));
  c.rope = RopeSpec{.theta = 1000000.0};  // Qwen3's
  return c;
}

const std::vector<OpShape> kHeadShapes = {{.rows = 1, .in = 128, .heads = 3},
                                          {.rows = 3, .in = 36, .heads = 5},
                                          {.rows = 17, .in = 64, .heads = 2}};
const std::vector<OpShape> kModelHeadShapes = {{.rows = 1, .in = 128, .heads = 16},
                                               {.rows = 16, .in = 128, .heads = 16},
                                               {.rows = 128, .in = 128, .heads = 16}};

// ---- SwiGLU: x = gate_up [rows, 2·in] (gates over [-12, 12]: saturated and linear), y0 [rows,
// in]. SiLU, GRU update: in place over y0 (GRU: gates_x = x, gates_h = v, [rows, 3·in]).
OpCall MakeGates(const OpShape& s, OpFormat format, uint32_t seed) {
  std::mt19937 rng(seed);
  return {.shape = s,
          .format = format,
          .x = RandomNormal(rng, s.rows * 3 * s.in, 0.0f, 4.0f),
          .v = RandomNormal(rng, s.rows * 3 * s.in, 0.0f, 3.0f),
          .y0 = RandomNormal(rng, s.rows * s.in, 0.0f, 3.0f)};
}

// ---- Embedding: w = table [out = vocab, in], ids [rows] (repeats and the last id among
// them), y0 [rows, in].
OpCall MakeEmbedding(const OpShape& s, OpFormat format, uint32_t seed) {
  std::mt19937 rng(seed);
  OpCall c{.shape = s, .format = format};
  c.w = RandomNormal(rng, s.out * s.in);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(s.out - 1));
  for (int64_t r = 0; r < s.rows; ++r)
    c.ids.push_back(r == 0 ? static_cast<int32_t>(s.out - 1) : id(rng));
  c.y0.assign(s.rows * s.in, kNaN);
  return c;
}

// ---- Softmax: in place over y0 [rows, in], logits far from 0 (a naive e^x overflows) and one
// masked (−inf) per row. Argmax: x [rows, in], y0 [rows] (the indices as floats).
OpCall MakeLogits(const OpShape& s, OpFormat format, uint32_t seed) {
  std::mt19937 rng(seed);
  OpCall c{.shape = s, .format = format};
  c.x = RandomNormal(rng, s.rows * s.in, 5000.0f, 30.0f);
  for (int64_t r = 0; r < s.rows; ++r) c.x[r * s.in + (r * 7) % s.in] = -INFINITY;
  c.y0 = c.x;
  return c;
}

void Argmax(const OpCall& c, float* out, bool reference) {
  std::vector<int32_t> index(c.shape.rows);
  (reference ? ref::ArgmaxRows : cpu::ArgmaxRows)(c.x.data(), c.shape.rows, c.shape.in,
                                                  index.data());
  for (int64_t r = 0; r < c.shape.rows; ++r) out[r] = static_cast<float>(index[r]);
}

// ---- The router: x [rows, in = experts] logits (spread so that no two of a row's
// probabilities are within the f32 softmax's rounding of each other); out = the ids
// [rows, k = out] as floats, then the weights [rows, k].
OpCall MakeRouterLogits(const OpShape& s, OpFormat format, uint32_t seed) {
  std::mt19937 rng(seed);
  OpCall c{.shape = s, .format = format};
  c.x = RandomNormal(rng, s.rows * s.in, 0.0f, 2.0f);
  c.y0.assign(2 * s.rows * s.out, kNaN);
  return c;
}

void RouteTopK(const OpCall& c, float* out, bool reference) {
  const OpShape& s = c.shape;
  std::vector<int32_t> ids(s.rows * s.out);
  if (reference) {
    ref::RouteTopK(c.x.data(), s.rows, s.in, s.out, s.normalize, ids.data(), out + ids.size());
  } else {
    std::vector<float> logits = c.x;  // the kernel works in its input
    cpu::RouteTopK(logits.data(), s.rows, s.in, s.out, s.normalize, ids.data(), out + ids.size());
  }
  for (size_t i = 0; i < ids.size(); ++i) out[i] = static_cast<float>(ids[i]);
}

// ---- The int8 activation quantiser: x [rows, in] (one all-zero group in row 0); the output is
// q [rows, groups · 32], then d_x [rows, groups], then Σ q_x [rows, groups], all as floats
// (exact: |q| ≤ 127, |Σ q| ≤ 32 · 127).
int64_t QuantizedSize(const OpShape& s) { return s.rows * cpu::Int8Groups(s.in) * 34; }

OpCall MakeQuantizeInput(const OpShape& s, OpFormat format, uint32_t seed) {
  std::mt19937 rng(seed);
  OpCall c{.shape = s, .format = format, .x = RandomNormal(rng, s.rows * s.in, 0.0f, 3.0f)};
  std::fill(c.x.begin(), c.x.begin() + std::min<int64_t>(32, s.in), 0.0f);
  c.y0.assign(QuantizedSize(s), kNaN);
  return c;
}

void QuantizeReference(const OpCall& c, float* out) {
  const OpShape& s = c.shape;
  const int64_t groups = cpu::Int8Groups(s.in), padded = groups * 32;
  float* scales = out + s.rows * padded;
  float* sums = scales + s.rows * groups;
  std::vector<int8_t> q(s.in);
  for (int64_t r = 0; r < s.rows; ++r) {
    ref::QuantizeActivationsInt8(c.x.data() + r * s.in, s.in, 32, q.data(), scales + r * groups);
    for (int64_t i = 0; i < padded; ++i) out[r * padded + i] = i < s.in ? q[i] : 0.0f;
    for (int64_t g = 0; g < groups; ++g) {
      float sum = 0;
      for (int64_t i = g * 32; i < std::min(s.in, (g + 1) * 32); ++i) sum += q[i];
      sums[r * groups + g] = sum;
    }
  }
}

void QuantizeKernel(const OpCall& c, const OpVariant&, float* out) {
  const OpShape& s = c.shape;
  const int64_t groups = cpu::Int8Groups(s.in);
  std::vector<int8_t> q(s.rows * groups * 32);
  std::vector<int32_t> sums(s.rows * groups);
  float* scales = out + q.size();
  cpu::QuantizeInt8Activations(c.x.data(), s.rows, s.in, q.data(), scales, sums.data());
  std::copy(q.begin(), q.end(), out);
  std::copy(sums.begin(), sums.end(), scales + sums.size());
}

// The f32 elementwise ops: one dispatched variant, within 1e-5 relative of the reference.
OpSpec ElementwiseF32(OpSpec op) {
  op.formats = {OpFormat::kF32};
  op.bound = "1e-5·|want| + 1e-6";
  op.tolerance = Elementwise;
  op.variants = DispatchOnly;
  return op;
}

}  // namespace

OpSpec RmsNormOp() {
  return ElementwiseF32(
      {.name = "rms_norm",
       .test_shapes = kRowShapes,
       .model_shapes = kHiddenShapes,
       .make = MakeRmsNorm,
       .run_reference =
           [](const OpCall& c, float* y) {
             ref::RmsNorm(c.x.data(), c.w.data(), y, c.shape.rows, c.shape.in, kRmsEps);
           },
       .run_variant =
           [](const OpCall& c, const OpVariant&, float* y) {
             cpu::RmsNorm(c.x.data(), c.w.data(), y, c.shape.rows, c.shape.in, kRmsEps);
           },
       .cost = [](const OpShape& s, OpFormat) { return Streamed(s, s.in, s.in); }});
}

OpSpec HeadRmsNormOp() {
  return ElementwiseF32(
      {.name = "head_rms_norm",
       .test_shapes = kHeadShapes,
       .model_shapes = kModelHeadShapes,
       .make = MakeHeads,
       .run_reference =
           [](const OpCall& c, float* x) {
             const OpShape& s = c.shape;
             ref::HeadRmsNorm(x, c.w.data(), s.rows, s.heads, s.in, s.heads * s.in, kRmsEps);
           },
       .run_variant =
           [](const OpCall& c, const OpVariant&, float* x) {
             const OpShape& s = c.shape;
             cpu::HeadRmsNorm(x, c.w.data(), s.rows, s.heads, s.in, s.heads * s.in, kRmsEps);
           },
       .cost = [](const OpShape& s,
                  OpFormat) { return Streamed(s, s.heads * s.in, s.heads * s.in); }});
}

OpSpec RopeOp() {
  return ElementwiseF32(
      {.name = "rope",
       .test_shapes = kHeadShapes,
       .model_shapes = kModelHeadShapes,
       .make = MakeHeads,
       .run_reference =
           [](const OpCall& c, float* x) {
             const OpShape& s = c.shape;
             ref::ApplyRope(x, c.ids.data(), s.rows, s.heads, s.in, s.heads * s.in, c.rope);
           },
       .run_variant =
           [](const OpCall& c, const OpVariant&, float* x) {
             const OpShape& s = c.shape;
             cpu::ApplyRope(x, c.ids.data(), s.rows, s.heads, s.in, s.heads * s.in, c.rope);
           },
       .cost = [](const OpShape& s,
                  OpFormat) { return Streamed(s, s.heads * s.in, s.heads * s.in); }});
}

OpSpec SwiGluOp() {
  return ElementwiseF32(
      {.name = "swiglu",
       .test_shapes = kRowShapes,
       // Qwen3-1.7B's intermediate width.
       .model_shapes = {{.rows = 1, .in = 6144},
                        {.rows = 16, .in = 6144},
                        {.rows = 128, .in = 6144}},
       .make =
           [](const OpShape& s, OpFormat f, uint32_t seed) {
             OpCall c = MakeGates(s, f, seed);
             c.x.resize(s.rows * 2 * s.in);
             c.y0.assign(s.rows * s.in, kNaN);
             return c;
           },
       .run_reference = [](const OpCall& c,
                           float* y) { ref::SwiGlu(c.x.data(), y, c.shape.rows, c.shape.in); },
       .run_variant = [](const OpCall& c, const OpVariant&,
                         float* y) { cpu::SwiGlu(c.x.data(), y, c.shape.rows, c.shape.in); },
       .cost = [](const OpShape& s, OpFormat) { return Streamed(s, 2 * s.in, s.in); }});
}

OpSpec SiluOp() {
  return ElementwiseF32(
      {.name = "silu",
       .test_shapes = kRowShapes,
       .model_shapes = kHiddenShapes,
       .make = MakeGates,
       .run_reference = [](const OpCall& c,
                           float* x) { ref::SiluInPlace(x, c.shape.rows * c.shape.in); },
       .run_variant = [](const OpCall& c, const OpVariant&,
                         float* x) { cpu::SiluInPlace(x, c.shape.rows * c.shape.in); },
       .cost = [](const OpShape& s, OpFormat) { return Streamed(s, s.in, s.in); }});
}

OpSpec GruUpdateOp() {
  return ElementwiseF32(
      {.name = "gru_update",
       .test_shapes = kRowShapes,
       .model_shapes = kHiddenShapes,
       .make = MakeGates,
       .run_reference =
           [](const OpCall& c, float* h) {
             ref::GruUpdate(c.x.data(), c.v.data(), h, c.shape.rows, c.shape.in);
           },
       .run_variant =
           [](const OpCall& c, const OpVariant&, float* h) {
             cpu::GruUpdate(c.x.data(), c.v.data(), h, c.shape.rows, c.shape.in);
           },
       .cost = [](const OpShape& s, OpFormat) { return Streamed(s, 7 * s.in, s.in); }});
}

OpSpec EmbeddingOp() {
  return {.name = "embedding",
          .formats = {OpFormat::kF32},
          .test_shapes = {{.rows = 1, .in = 67, .out = 50}, {.rows = 17, .in = 131, .out = 7}},
          // Qwen3-1.7B's hidden width; a gather reads only the rows it names, so a slice of
          // the 151,936-token vocabulary costs what the whole would.
          .model_shapes = {{.rows = 1, .in = 2048, .out = 16384},
                           {.rows = 16, .in = 2048, .out = 16384},
                           {.rows = 128, .in = 2048, .out = 16384}},
          .bound = "exact",
          .make = MakeEmbedding,
          .run_reference =
              [](const OpCall& c, float* y) {
                const OpShape& s = c.shape;
                ref::EmbeddingGather(c.w.data(), s.out, s.in, c.ids.data(), s.rows, y);
              },
          .tolerance = Exact,
          .variants = DispatchOnly,
          .run_variant =
              [](const OpCall& c, const OpVariant&, float* y) {
                const OpShape& s = c.shape;
                cpu::EmbeddingGather(c.w.data(), s.out, s.in, c.ids.data(), s.rows, y);
              },
          .cost = [](const OpShape& s, OpFormat) { return Streamed(s, s.in, s.in); }};
}

OpSpec SoftmaxOp() {
  return {.name = "softmax",
          .formats = {OpFormat::kF32},
          .test_shapes = kRowShapes,
          // Rows of Qwen3-1.7B's vocabulary.
          .model_shapes = {{.rows = 1, .in = 151936}, {.rows = 16, .in = 151936}},
          .bound = "1e-6 absolute (probabilities)",
          .make = MakeLogits,
          .run_reference = [](const OpCall& c,
                              float* x) { ref::SoftmaxRows(x, c.shape.rows, c.shape.in); },
          .tolerance =
              [](const OpCall&, const std::vector<float>& want) {
                return RelativeTolerance(want, 0.0, kSoftmaxAbsTol);
              },
          .variants = DispatchOnly,
          .run_variant = [](const OpCall& c, const OpVariant&,
                            float* x) { cpu::SoftmaxRows(x, c.shape.rows, c.shape.in); },
          .cost = [](const OpShape& s, OpFormat) { return Streamed(s, s.in, s.in); }};
}

OpSpec ArgmaxOp() {
  return {
      .name = "argmax",
      .formats = {OpFormat::kF32},
      .test_shapes = kRowShapes,
      .model_shapes = {{.rows = 1, .in = 151936}, {.rows = 16, .in = 151936}},
      .bound = "exact",
      .make =
          [](const OpShape& s, OpFormat f, uint32_t seed) {
            OpCall c = MakeLogits(s, f, seed);
            c.y0.assign(s.rows, kNaN);
            return c;
          },
      .run_reference = [](const OpCall& c, float* out) { Argmax(c, out, true); },
      .tolerance = Exact,
      .variants = DispatchOnly,
      .run_variant = [](const OpCall& c, const OpVariant&, float* out) { Argmax(c, out, false); },
      .cost = [](const OpShape& s, OpFormat) { return Streamed(s, s.in, 0); }};
}

OpSpec QuantizeInt8ActivationsOp() {
  return {.name = "quantize_int8_act",
          .formats = {OpFormat::kInt8},
          .test_shapes = kRowShapes,
          .model_shapes = kHiddenShapes,
          .bound = "exact",
          .make = MakeQuantizeInput,
          .run_reference = QuantizeReference,
          .tolerance = Exact,
          .variants = DispatchOnly,
          .run_variant = QuantizeKernel,
          .cost = [](const OpShape& s, OpFormat) {
            return OpCost{.bytes = s.rows * (4.0 * s.in + 1.0 * s.in + 8.0 * cpu::Int8Groups(s.in)),
                          .madds = 0};
          }};
}

OpSpec RouteTopKOp() {
  return {.name = "route_top_k",
          .formats = {OpFormat::kF32},
          .test_shapes = {{.rows = 1, .in = 7, .out = 3},
                          {.rows = 17, .in = 13, .out = 4, .normalize = true},
                          {.rows = 5, .in = 128, .out = 8, .normalize = true}},
          // Qwen3-30B-A3B's: 128 experts, 8 a token.
          .model_shapes = {{.rows = 1, .in = 128, .out = 8, .normalize = true},
                           {.rows = 16, .in = 128, .out = 8, .normalize = true},
                           {.rows = 128, .in = 128, .out = 8, .normalize = true}},
          .bound = "experts exact, weights 1e-6 absolute",
          .make = MakeRouterLogits,
          .run_reference = [](const OpCall& c, float* out) { RouteTopK(c, out, true); },
          .tolerance =
              [](const OpCall& c, const std::vector<float>& want) {
                std::vector<double> tol(want.size(), kSoftmaxAbsTol);
                std::fill(tol.begin(), tol.begin() + c.shape.rows * c.shape.out, 0.0);
                return tol;
              },
          .variants = DispatchOnly,
          .run_variant = [](const OpCall& c, const OpVariant&,
                            float* out) { RouteTopK(c, out, false); },
          .cost = [](const OpShape& s, OpFormat) { return Streamed(s, s.in, 2 * s.out); }};
}

}  // namespace dscale::testing
