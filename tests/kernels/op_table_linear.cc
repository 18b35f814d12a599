// The linear row of the op table: y[rows, out] = x[rows, in] · w[out, in]ᵀ (y += that with
// shape.accumulate) in every weight format the model loads. OpCall use: x [rows, in]; the
// weights in w (f32), w_bf16, w_int8 + scales or w_int4 + scales; y0 [rows, out] (random when
// accumulating, else NaN so an unwritten output fails).
//
// Bounds (float_bounds.h): with f32 activations every product is summed in f32 in some order,
// so each output is within γ_(in+1)·Σ|terms| of the double reference (Σ|terms| = |y0| + Σ|x·w|,
// BF16 weights widened exactly), γ_(in+2) for int8/int4 whose w·s is one more rounding; with
// BF16 activations the products of two BF16 values are exact, the same γ_(in+1) over the rounded
// x; with int8 activations the order is specified (gemm_int8.h), so the bits are the reference's.

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "core/dtype.h"
#include "float_bounds.h"
#include "kernel_test_util.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/gemm_int4.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/reference/reference_kernels.h"
#include "op_rows.h"

namespace dscale::testing {
namespace {

using cpu::Int8Groups;

std::vector<float> ScaleValues(const OpCall& call) {
  std::vector<float> values(call.scales.size());
  for (size_t i = 0; i < values.size(); ++i) values[i] = cpu::Int8ScaleValue(call.scales[i]);
  return values;
}

bool Int8Activations(OpFormat f) {
  return f == OpFormat::kInt8Int8Act || f == OpFormat::kInt4Int8Act;
}

// Weights of mixed magnitudes per group of 32, some groups zero: what the quantisers see.
std::vector<float> GroupScaledWeights(std::mt19937& rng, int64_t out, int64_t in) {
  std::vector<float> w = RandomNormal(rng, out * in);
  std::uniform_real_distribution<float> exponent(-4.0f, 1.0f);
  std::bernoulli_distribution zero(0.05);
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t g = 0; g < Int8Groups(in); ++g) {
      const float m = zero(rng) ? 0.0f : std::pow(10.0f, exponent(rng));
      for (int64_t i = g * 32; i < std::min(in, (g + 1) * 32); ++i) w[o * in + i] *= m;
    }
  }
  return w;
}

// Activations of mixed magnitudes (each row scaled by 10^±3) with the last row's first group all
// zero (the int8 quantiser's zero scale).
std::vector<float> MixedActivations(std::mt19937& rng, int64_t rows, int64_t in) {
  std::vector<float> x = RandomNormal(rng, rows * in);
  std::uniform_real_distribution<float> magnitude(-3.0f, 3.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float m = std::pow(10.0f, magnitude(rng));
    for (int64_t i = 0; i < in; ++i) x[r * in + i] *= m;
  }
  std::fill_n(x.begin() + (rows - 1) * in, std::min<int64_t>(in, 32), 0.0f);
  return x;
}

OpCall MakeLinear(const OpShape& s, OpFormat format, uint32_t seed) {
  std::mt19937 rng(seed);
  OpCall c{.shape = s, .format = format};
  c.x = MixedActivations(rng, s.rows, s.in);
  c.y0 = s.accumulate ? RandomNormal(rng, s.rows * s.out)
                      : std::vector<float>(s.rows * s.out, std::numeric_limits<float>::quiet_NaN());
  switch (format) {
    case OpFormat::kF32:
      c.w = RandomNormal(rng, s.out * s.in);
      break;
    case OpFormat::kBf16:
    case OpFormat::kBf16Bf16Act:
      for (const float v : RandomNormal(rng, s.out * s.in)) c.w_bf16.push_back(F32ToBf16(v));
      break;
    case OpFormat::kInt8:
    case OpFormat::kInt8Int8Act:
      c.w_int8.resize(s.out * s.in);
      c.scales.resize(s.out * Int8Groups(s.in));
      cpu::QuantizeInt8Weights(GroupScaledWeights(rng, s.out, s.in).data(), s.out, s.in,
                               c.w_int8.data(), c.scales.data(), /*vector=*/false);
      break;
    case OpFormat::kInt4:
    case OpFormat::kInt4Int8Act:
      c.w_int4.resize(s.out * cpu::Int4RowBytes(s.in));
      c.scales.resize(s.out * Int8Groups(s.in));
      cpu::QuantizeInt4Weights(GroupScaledWeights(rng, s.out, s.in).data(), s.out, s.in,
                               c.w_int4.data(), c.scales.data(), /*vector=*/false);
      break;
  }
  return c;
}

void LinearReference(const OpCall& c, float* y) {
  const OpShape& s = c.shape;
  const bool acc = s.accumulate;
  switch (c.format) {
    case OpFormat::kF32:
      return ref::Linear(c.x.data(), c.w.data(), y, s.rows, s.in, s.out, acc);
    case OpFormat::kBf16:
    case OpFormat::kBf16Bf16Act:
      return ref::LinearBf16(c.x.data(), c.w_bf16.data(), y, s.rows, s.in, s.out,
                             c.format == OpFormat::kBf16Bf16Act, acc);
    case OpFormat::kInt8:
      return ref::LinearInt8(c.x.data(), c.w_int8.data(), ScaleValues(c).data(), y, s.rows, s.in,
                             s.out, cpu::kInt8GroupSize, acc);
    case OpFormat::kInt8Int8Act:
      return ref::LinearInt8Int8(c.x.data(), c.w_int8.data(), ScaleValues(c).data(), y, s.rows,
                                 s.in, s.out, cpu::kInt8GroupSize, acc);
    case OpFormat::kInt4:
    case OpFormat::kInt4Int8Act:
      return ref::LinearInt4(c.x.data(), c.w_int4.data(), ScaleValues(c).data(), y, s.rows, s.in,
                             s.out, Int8Activations(c.format), acc);
  }
}

// The f32 value weight (o, i) stands for (exact for f32 and BF16; w·s in double for int8/int4).
double WeightValue(const OpCall& c, int64_t o, int64_t i) {
  const int64_t in = c.shape.in;
  const auto scale = [&] {
    return double{cpu::Int8ScaleValue(c.scales[o * Int8Groups(in) + i / 32])};
  };
  switch (c.format) {
    case OpFormat::kF32:
      return c.w[o * in + i];
    case OpFormat::kBf16:
    case OpFormat::kBf16Bf16Act:
      return Bf16ToF32(c.w_bf16[o * in + i]);
    case OpFormat::kInt8:
    case OpFormat::kInt8Int8Act:
      return c.w_int8[o * in + i] * scale();
    case OpFormat::kInt4:
    case OpFormat::kInt4Int8Act: {
      const uint8_t byte = c.w_int4[o * cpu::Int4RowBytes(in) + i / 32 * 16 + i % 16];
      return ((i % 32 < 16 ? byte & 0xf : byte >> 4) - 8) * scale();
    }
  }
  return NAN;
}

std::vector<double> LinearTolerance(const OpCall& c, const std::vector<float>& want) {
  const OpShape& s = c.shape;
  if (Int8Activations(c.format)) return std::vector<double>(want.size(), 0.0);
  const bool bf16_x = c.format == OpFormat::kBf16Bf16Act;
  const bool quantised = c.format == OpFormat::kInt8 || c.format == OpFormat::kInt4;
  const double gamma = FloatGamma(s.in + (quantised ? 2 : 1));
  std::vector<double> tolerance(want.size());
  for (int64_t r = 0; r < s.rows; ++r) {
    for (int64_t o = 0; o < s.out; ++o) {
      double mass = s.accumulate ? std::fabs(c.y0[r * s.out + o]) : 0.0;
      for (int64_t i = 0; i < s.in; ++i) {
        const float xi = c.x[r * s.in + i];
        mass += std::fabs((bf16_x ? Bf16ToF32(F32ToBf16(xi)) : xi) * WeightValue(c, o, i));
      }
      tolerance[r * s.out + o] = gamma * mass + 1e-30;
    }
  }
  return tolerance;
}

// Per format: the vector variants in their enum's order, then the dispatched kernel.
template <typename Isa>
std::vector<OpVariant> EnumVariants(int count, std::string_view (*name)(Isa),
                                    const std::vector<Isa>& supported) {
  std::vector<OpVariant> variants;
  for (int id = 0; id < count; ++id) {
    const auto isa = static_cast<Isa>(id);
    const bool ok = std::find(supported.begin(), supported.end(), isa) != supported.end();
    variants.push_back({std::string(name(isa)), id, ok});
  }
  return variants;
}

std::vector<OpVariant> LinearVariants(OpFormat format) {
  std::vector<OpVariant> variants;
  switch (format) {
    case OpFormat::kF32:
    case OpFormat::kBf16:
    case OpFormat::kInt8:
      variants = Bf16IsaVariants();
      break;
    case OpFormat::kBf16Bf16Act:
      variants = EnumVariants(5, cpu::Bf16DotIsaName, cpu::SupportedBf16DotIsas());
      break;
    case OpFormat::kInt8Int8Act:
      variants = EnumVariants(5, cpu::Int8DotIsaName, cpu::SupportedInt8DotIsas());
      break;
    case OpFormat::kInt4Int8Act:
      variants = EnumVariants(5, cpu::Int4KernelName, cpu::SupportedInt4Kernels());
      break;
    case OpFormat::kInt4:
      break;  // f32 activations: one kernel, unpacked chunks through LinearInt8's
  }
  variants.push_back(DispatchVariant());
  return variants;
}

// A 4-bit call's weights in `layout` (the panels packed into `panels`).
struct Int4Panels {
  std::vector<uint8_t> values;
  std::vector<cpu::Int8Scale> scales;
};
cpu::Int4Matrix Int4In(const OpCall& c, cpu::QuantLayout layout, Int4Panels& panels) {
  if (layout == cpu::QuantLayout::kRows) return {c.w_int4.data(), c.scales.data()};
  const OpShape& s = c.shape;
  panels.values.resize(cpu::QuantPanels(0, s.out) * cpu::Int4PanelBytes(s.in));
  panels.scales.resize(cpu::QuantPanels(0, s.out) * cpu::QuantPanelScales(s.in));
  cpu::PackInt4Panels(c.w_int4.data(), c.scales.data(), s.out, s.in, panels.values.data(),
                      panels.scales.data());
  return {panels.values.data(), panels.scales.data(), layout};
}

// An int8 call's weights in `layout` (the panels packed into `panels`).
struct Int8Panels {
  std::vector<int8_t> values;
  std::vector<cpu::Int8Scale> scales;
};
cpu::Int8Matrix Int8In(const OpCall& c, cpu::QuantLayout layout, Int8Panels& panels) {
  if (layout == cpu::QuantLayout::kRows) return {c.w_int8.data(), c.scales.data()};
  const OpShape& s = c.shape;
  panels.values.resize(cpu::QuantPanels(0, s.out) * cpu::Int8PanelBytes(s.in));
  panels.scales.resize(cpu::QuantPanels(0, s.out) * cpu::QuantPanelScales(s.in));
  cpu::PackInt8Panels(c.w_int8.data(), c.scales.data(), s.out, s.in, panels.values.data(),
                      panels.scales.data());
  return {panels.values.data(), panels.scales.data(), layout};
}

// The kernels' own entry points, one per format (what the model calls: int8 and 4-bit weights in
// the layout it loads them in).
void LinearDispatch(const OpCall& c, float* y) {
  const OpShape& s = c.shape;
  const bool acc = s.accumulate;
  const cpu::Int8Activations act =
      Int8Activations(c.format) ? cpu::Int8Activations::kInt8 : cpu::Int8Activations::kF32;
  switch (c.format) {
    case OpFormat::kF32:
      return cpu::Linear(c.x.data(), c.w.data(), y, s.rows, s.in, s.out, acc);
    case OpFormat::kBf16:
    case OpFormat::kBf16Bf16Act:
      return cpu::LinearBf16(
          c.x.data(), c.w_bf16.data(), y, s.rows, s.in, s.out, acc, 0,
          c.format == OpFormat::kBf16 ? cpu::Bf16Activations::kF32 : cpu::Bf16Activations::kBf16);
    case OpFormat::kInt8:
    case OpFormat::kInt8Int8Act: {
      Int8Panels panels;
      return cpu::LinearInt8(c.x.data(), Int8In(c, cpu::PreferredInt8Layout(act), panels), y,
                             s.rows, s.in, s.out, acc, 0, act);
    }
    case OpFormat::kInt4:
    case OpFormat::kInt4Int8Act: {
      Int4Panels panels;
      return cpu::LinearInt4(c.x.data(), Int4In(c, cpu::PreferredInt4Layout(), panels), y, s.rows,
                             s.in, s.out, acc, 0, act);
    }
  }
}

void RunLinear(const OpCall& c, const OpVariant& v, float* y) {
  if (v.id == kDispatchVariant) return LinearDispatch(c, y);
  const OpShape& s = c.shape;
  const bool acc = s.accumulate;
  switch (c.format) {
    case OpFormat::kF32:
      return cpu::LinearF32Tiled(static_cast<cpu::Bf16Isa>(v.id), c.x.data(), c.w.data(), y, s.rows,
                                 s.in, s.out, acc);
    case OpFormat::kBf16:
      return cpu::LinearBf16Tiled(static_cast<cpu::Bf16Isa>(v.id), c.x.data(), c.w_bf16.data(), y,
                                  s.rows, s.in, s.out, acc);
    case OpFormat::kBf16Bf16Act:
      return cpu::LinearBf16DotTiled(static_cast<cpu::Bf16DotIsa>(v.id), c.x.data(),
                                     c.w_bf16.data(), y, s.rows, s.in, s.out, acc);
    case OpFormat::kInt8:
      return cpu::LinearInt8Tiled(static_cast<cpu::Bf16Isa>(v.id), c.x.data(), c.w_int8.data(),
                                  c.scales.data(), y, s.rows, s.in, s.out, acc);
    case OpFormat::kInt8Int8Act:
      return cpu::LinearInt8Dot(static_cast<cpu::Int8DotIsa>(v.id), c.x.data(), c.w_int8.data(),
                                c.scales.data(), y, s.rows, s.in, s.out, acc);
    case OpFormat::kInt4Int8Act: {
      const auto kernel = static_cast<cpu::Int4Kernel>(v.id);
      const cpu::QuantLayout layout = cpu::Int4KernelReads(kernel, cpu::QuantLayout::kRows)
                                          ? cpu::QuantLayout::kRows
                                          : cpu::QuantLayout::kPanels;
      Int4Panels panels;
      return cpu::LinearInt4Via(kernel, c.x.data(), Int4In(c, layout, panels), y, s.rows, s.in,
                                s.out, acc);
    }
    case OpFormat::kInt4:
      return LinearDispatch(c, y);
  }
}

double WeightBytes(OpFormat format, double weights, double groups) {
  switch (format) {
    case OpFormat::kF32:
      return 4 * weights;
    case OpFormat::kBf16:
    case OpFormat::kBf16Bf16Act:
      return 2 * weights;
    case OpFormat::kInt8:
    case OpFormat::kInt8Int8Act:
      return weights + 2 * groups;
    case OpFormat::kInt4:
    case OpFormat::kInt4Int8Act:
      return weights / 2 + 2 * groups;
  }
  return 0;
}

OpCost LinearCost(const OpShape& s, OpFormat format) {
  const double weights = static_cast<double>(s.out) * s.in;
  const double groups = static_cast<double>(s.out) * Int8Groups(s.in);
  return {.bytes = WeightBytes(format, weights, groups) + 4.0 * s.rows * (s.in + s.out),
          .madds = weights * s.rows};
}

}  // namespace

OpSpec LinearOp() {
  return {
      .name = "linear",
      .formats = {OpFormat::kF32, OpFormat::kBf16, OpFormat::kBf16Bf16Act, OpFormat::kInt8,
                  OpFormat::kInt8Int8Act, OpFormat::kInt4, OpFormat::kInt4Int8Act},
      // One row (the decode path), 3 and 6 rows off the 4-row register tiles, 17 past the AMX and
      // 16-row tiles, 129 past the 128-row blocks; inputs off the 32-input groups and the vector
      // widths (1031: past one pack of 32 groups), outputs off the 4-output passes; accumulating
      // once.
      .test_shapes = {{.rows = 1, .in = 257, .out = 67},
                      {.rows = 3, .in = 67, .out = 131, .accumulate = true},
                      {.rows = 6, .in = 1031, .out = 9},
                      {.rows = 17, .in = 131, .out = 33},
                      {.rows = 129, .in = 33, .out = 17}},
      // Qwen3-1.7B's gate projection (hidden 2048 → intermediate 6144).
      .model_shapes = {{.rows = 1, .in = 2048, .out = 6144},
                       {.rows = 16, .in = 2048, .out = 6144},
                       {.rows = 128, .in = 2048, .out = 6144}},
      .bound =
          "f32 activations: γ_(in+1)·Σ|terms| (int8/int4 weights γ_(in+2)); BF16 "
          "activations: γ_(in+1) over the rounded x; int8 activations: the reference's bits",
      .make = MakeLinear,
      .run_reference = LinearReference,
      .tolerance = LinearTolerance,
      .variants = LinearVariants,
      .run_variant = RunLinear,
      .cost = LinearCost,
  };
}

}  // namespace dscale::testing
