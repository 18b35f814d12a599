// The op table's attention row: causal paged attention (cpu/attention.h) over a batch of
// `spans` spans of `rows` query rows each, after `out` positions of context, with `heads` query
// heads over `kv_heads` K/V heads of head_dim `in`. OpCall use: x = q [total rows, (heads +
// 2·kv_heads)·in] (q inside a fused QKV row), w / v = K / V [slots, kv_heads, in] f32 (for
// BF16 K/V the exact widening of w_bf16 = K then V), ids = the spans' page tables back to back
// over a shuffled pool of 16-position pages, y0 [total rows, heads·in] NaN.
//
// Variants: every compiled tile height × every Bf16Isa (BF16 rows widened with its vectors; the
// AVX-512 variant also runs the tiles in 16-lane vectors), and the dispatch the model makes
// (the best ISA, the tile TileRowsFor picks with routing on).
//
// Bound: with q, k, v ~ N(0, 1) and scale 1/sqrt(head_dim) every output is a convex combination
// of values of order 1; f32 scores, exponentials and sums stay within a few 1e-7 of the double
// reference, so 1e-5 absolute leaves room without hiding a wrong mask or a wrong page.

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "core/dtype.h"
#include "kernel_test_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/reference/reference_kernels.h"
#include "op_rows.h"

namespace dscale::testing {
namespace {

constexpr int32_t kPageSize = 16;
constexpr double kAttentionAbsTol = 1e-5;

int64_t PagesPerSpan(const OpShape& s) { return (s.out + s.rows + kPageSize - 1) / kPageSize; }
int64_t QRowStride(const OpShape& s) { return int64_t{s.heads + 2 * s.kv_heads} * s.in; }

OpCall MakeAttention(const OpShape& s, OpFormat format, uint32_t seed) {
  std::mt19937 rng(seed);
  OpCall c{.shape = s, .format = format};
  const int64_t pages = PagesPerSpan(s) * s.spans, pool = pages + 3;  // spare pages unused
  c.ids.resize(pool);
  std::iota(c.ids.begin(), c.ids.end(), 0);
  std::shuffle(c.ids.begin(), c.ids.end(), rng);
  c.ids.resize(pages);
  const int64_t kv_values = pool * kPageSize * s.kv_heads * s.in;
  c.x = RandomNormal(rng, s.spans * s.rows * QRowStride(s));
  c.w = RandomNormal(rng, kv_values);
  c.v = RandomNormal(rng, kv_values);
  if (format == OpFormat::kBf16) {
    for (std::vector<float>* f32 : {&c.w, &c.v}) {
      for (float& value : *f32) {
        c.w_bf16.push_back(F32ToBf16(value));
        value = Bf16ToF32(c.w_bf16.back());
      }
    }
  }
  c.y0.assign(s.spans * s.rows * s.heads * s.in, std::numeric_limits<float>::quiet_NaN());
  return c;
}

// The kernel's parameters for `call`, writing `out`; `spans` receives the spans (pointing into
// call.ids) and must outlive the parameters.
cpu::AttentionParams Params(const OpCall& c, float* out, std::vector<StepSpan>& spans) {
  const OpShape& s = c.shape;
  spans.clear();
  for (int32_t i = 0; i < s.spans; ++i) {
    spans.push_back({.q_start = static_cast<int32_t>(i * s.rows),
                     .q_len = static_cast<int32_t>(s.rows),
                     .ctx_len = static_cast<int32_t>(s.out),
                     .page_table = c.ids.data() + i * PagesPerSpan(s)});
  }
  cpu::AttentionParams p{.q = c.x.data(),
                         .q_row_stride = QRowStride(s),
                         .out = out,
                         .heads = s.heads,
                         .kv_heads = s.kv_heads,
                         .head_dim = static_cast<int32_t>(s.in),
                         .scale = 1.0f / std::sqrt(static_cast<float>(s.in)),
                         .causal = true,
                         .spans = spans.data(),
                         .num_spans = s.spans};
  if (c.format == OpFormat::kBf16) {
    const size_t half = c.w_bf16.size() / 2;
    p.kv = {.page_size = kPageSize, .k_bf16 = c.w_bf16.data(), .v_bf16 = c.w_bf16.data() + half};
  } else {
    p.kv = {.k = c.w.data(), .v = c.v.data(), .page_size = kPageSize};
  }
  return p;
}

void AttentionReference(const OpCall& c, float* out) {
  std::vector<StepSpan> spans;
  ref::PagedAttention(Params(c, out, spans));
}

// id = tile height · 8 + Bf16Isa.
std::vector<OpVariant> AttentionVariants(OpFormat) {
  std::vector<OpVariant> variants;
  for (const int tile : cpu::kAttentionTileHeights) {
    for (const OpVariant& isa : Bf16IsaVariants()) {
      variants.push_back(
          {"t" + std::to_string(tile) + "_" + isa.name, tile * 8 + isa.id, isa.supported});
    }
  }
  variants.push_back(DispatchVariant());
  return variants;
}

void RunAttention(const OpCall& c, const OpVariant& variant, float* out) {
  std::vector<StepSpan> spans;
  const cpu::AttentionParams p = Params(c, out, spans);
  if (variant.id == kDispatchVariant) {
    return cpu::PagedAttention(p, TileRowsFor(static_cast<int32_t>(c.shape.rows), true));
  }
  cpu::PagedAttention(p, variant.id / 8, static_cast<cpu::Bf16Isa>(variant.id % 8));
}

// K and V of every visible position read once per span; a score and a weighted value per
// (row, head, visible position).
OpCost AttentionCost(const OpShape& s, OpFormat format) {
  const double kv_row = 2.0 * s.kv_heads * s.in * (format == OpFormat::kBf16 ? 2 : 4);
  double visible = 0;
  for (int64_t j = 0; j < s.rows; ++j) visible += static_cast<double>(s.out + j + 1);
  return {.bytes = s.spans *
                   (kv_row * static_cast<double>(s.out + s.rows) + 8.0 * s.rows * s.heads * s.in),
          .madds = s.spans * visible * 2.0 * s.heads * s.in};
}

}  // namespace

OpSpec AttentionOp() {
  return {
      .name = "attention",
      .formats = {OpFormat::kF32, OpFormat::kBf16},
      // Decode rows after odd contexts, verify spans of 17 rows (past the 16-row tile) at a
      // head_dim off the vector widths, a prefill span of 131 rows (past the 128-row tile).
      .test_shapes = {{.rows = 1, .in = 128, .out = 67, .heads = 4, .kv_heads = 2, .spans = 3},
                      {.rows = 17, .in = 36, .out = 45, .heads = 6, .kv_heads = 2, .spans = 2},
                      {.rows = 131, .in = 64, .out = 0, .heads = 2, .kv_heads = 1}},
      // Qwen3-1.7B: 16 query heads over 8 K/V heads of 128; decode and a 16-row verify span
      // after 4,096 positions, a 128-row prefill chunk after 1,024.
      .model_shapes = {{.rows = 1, .in = 128, .out = 4096, .heads = 16, .kv_heads = 8},
                       {.rows = 16, .in = 128, .out = 4096, .heads = 16, .kv_heads = 8},
                       {.rows = 128, .in = 128, .out = 1024, .heads = 16, .kv_heads = 8}},
      .bound = "1e-5 absolute",
      .make = MakeAttention,
      .run_reference = AttentionReference,
      .tolerance =
          [](const OpCall&, const std::vector<float>& want) {
            return RelativeTolerance(want, 0.0, kAttentionAbsTol);
          },
      .variants = AttentionVariants,
      .run_variant = RunAttention,
      .cost = AttentionCost,
  };
}

}  // namespace dscale::testing
