// Row cost of one Qwen3 decoder layer's projections with BF16 weights (LinearBf16), against the
// machine's own limits measured in the same run: the memory read bandwidth (all threads summing
// a buffer far larger than the caches) and the sgemm rate (OpenBLAS, f32, a large square
// product). For 1 … 512 rows it prints the step time, the weight bytes read per second as a
// fraction of the bandwidth, the arithmetic rate as a fraction of the sgemm rate, and the time
// over the roofline max(weight bytes ÷ bandwidth, FLOPs ÷ sgemm rate); then the time of each
// register-tile variant, of widen-and-sgemm (what many rows ran before every row count took the
// row-invariant tiles) and of f32 weights (Linear: the same tiles) at the same row count, and every
// variant's bandwidth fraction at one row. The int8 columns run the same layer quantised for
// `--weights int8` (LinearInt8: 1 byte per weight plus a BF16 scale per 32): its time, bandwidth
// fraction (of its 1.0625 bytes per weight) and speed-up over BF16 at each row count; with
// --int8-variants also each int8 tile variant and dequantise-and-sgemm.
//
// With --activations 1 it prints instead the f32 and the BF16 activation modes of LinearBf16
// (gemm_bf16.h) side by side, the BF16 mode through each vector variant (the f32 tiles on the
// rounded activations, AVX512-BF16's dot products): the shape's gate (hidden → intermediate) and
// down (intermediate → hidden) projections and the whole layer at 1 … 32 rows, each the best of
// 40 calls with the columns alternating, and each column's cost of 16 rows over 1.
//
// With --int8-activations 1 it prints instead the int8 weights' two activation modes
// (LinearInt8, gemm_int8.h) side by side: f32 activations (the f32 tiles) and int8 ones through
// each int8 × int8 variant (AVX2, AVX-VNNI, AVX512-VNNI as the CPU has them; the last is what
// LinearInt8 runs), for the whole layer at 1 … 16 rows, each the best of 40 calls with the
// columns alternating; on an AVX-512 CPU also the AVX2 f32 tiles (what the 256-bit int8 variants
// compete with on an AVX2 machine); then the cost per row and of 16 rows over 1.
//
// With --int4 1 it prints instead the layer's int8 weights (`--weights int8`) against its 4-bit
// ones (`--weights int4`, LinearInt4, gemm_int4.h), both with int8 activations, over four copies
// of the layer (past the L3 in either format) at 1 … 128 rows, each the best of 20 calls with the
// columns alternating: their times, the weight bytes each reads per second as a fraction of the
// read bandwidth probed before, int8 over int4, and the time of each 4-bit kernel this CPU runs
// (LinearInt4Via; each on the layout this CPU loads where it reads that one, else on the other),
// of which LinearInt4 picks one by the row count. The 4-bit matrices lie on huge pages.
//
// With --roofs 1 it prints instead each weight format's layer as the model runs it — BF16 as
// stored (LinearBf16 in this CPU's default activation mode), int8 in the layout the model loads
// and in the other one (rows, panels: gemm_int8.h) and 4-bit, each with int8 activations —
// over four copies of the layer (past the L3) at 1, 2, 4, 8, 16 rows, each the best of 10 calls
// with the columns alternating, against its roof measured in the same run: max(weight bytes ÷
// read bandwidth, multiply-adds ÷ the rate of the instruction its tiles multiply with on all
// threads: vdpbf16ps for BF16 activations, vfmadd231ps for f32 ones, vpdpbusd for int8 ones; on
// 512-bit vectors where the CPU has them). "of roof" is roof ÷ time: 1.0 is the machine's limit.
// (Where AMX multiplies, its tiles beat the vector roof at many rows.)
//
//   build/linear_bf16_bench [--shape qwen3-0.6b|qwen3-1.7b|qwen3-4b|qwen3-8b] [--max-rows 512]
//                           [--int8-variants 1] [--activations 1] [--int8-activations 1]
//                           [--int4 1] [--roofs 1]

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "core/dtype.h"
#include "core/huge_pages.h"
#include "instruction_rates.h"
#include "io/qwen3_shapes.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/gemm_int4.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/openblas_kernels.h"
#include "machine_limits.h"

namespace dscale {
namespace {

struct LayerShape {
  std::string name;
  int64_t hidden, intermediate, q_dim, kv_dim;
};

// One layer's projection sizes in a NamedQwen3Config shape.
LayerShape LayerShapeOf(const std::string& name) {
  const DecoderConfig c = *NamedQwen3Config(name);
  return {.name = name,
          .hidden = c.hidden_size,
          .intermediate = c.intermediate_size,
          .q_dim = c.num_attention_heads * c.head_dim,
          .kv_dim = c.num_key_value_heads * c.head_dim};
}

struct Matrix {
  int64_t out, in;
  std::vector<uint16_t> bf16;
  std::vector<float> f32;
  std::vector<int8_t> int8;            // the BF16 values quantised (gemm_int8.h)
  std::vector<cpu::Int8Scale> scales;  // [out, Int8Groups(in)]
};

// The layer's four projections, [out, in]: stacked q/k/v, o, stacked gate/up, down.
std::vector<Matrix> LayerMatrices(const LayerShape& s) {
  const int64_t dims[4][2] = {{s.q_dim + 2 * s.kv_dim, s.hidden},
                              {s.hidden, s.q_dim},
                              {2 * s.intermediate, s.hidden},
                              {s.hidden, s.intermediate}};
  std::vector<Matrix> m;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (const auto& d : dims) {
    Matrix mat{.out = d[0], .in = d[1]};
    mat.bf16.resize(d[0] * d[1]);
    mat.f32.resize(d[0] * d[1]);
    for (size_t i = 0; i < mat.bf16.size(); ++i) {
      mat.bf16[i] = F32ToBf16(normal(rng));
      mat.f32[i] = Bf16ToF32(mat.bf16[i]);
    }
    mat.int8.resize(mat.f32.size());
    mat.scales.resize(d[0] * cpu::Int8Groups(d[1]));
    cpu::QuantizeInt8Weights(mat.f32.data(), d[0], d[1], mat.int8.data(), mat.scales.data());
    m.push_back(std::move(mat));
  }
  return m;
}

double SecondsPerCall(const std::function<void()>& call) {
  return bench::MedianSecondsPerCall(call, 0.2);
}

struct Args {
  LayerShape shape = LayerShapeOf("qwen3-1.7b");
  int64_t max_rows = 512;
  bool int8_variants = false;
  bool activations = false;
  bool int8_activations = false;
  bool int4 = false;
  bool roofs = false;
};

Args ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--max-rows") {
      a.max_rows = std::atoll(value.c_str());
    } else if (flag == "--activations") {
      a.activations = value != "0";
    } else if (flag == "--int8-activations") {
      a.int8_activations = value != "0";
    } else if (flag == "--roofs") {
      a.roofs = value != "0";
    } else if (flag == "--int4") {
      a.int4 = value != "0";
    } else if (flag == "--int8-variants") {
      a.int8_variants = value != "0";
    } else if (flag == "--shape") {
      if (!NamedQwen3Config(value)) {
        std::fprintf(stderr, "linear_bf16_bench: unknown --shape %s\n", value.c_str());
        std::exit(2);
      }
      a.shape = LayerShapeOf(value);
    } else {
      std::fprintf(stderr, "linear_bf16_bench: unknown flag %s\n", flag.c_str());
      std::exit(2);
    }
  }
  return a;
}

// The layer's time per call through `linear`, applied to each matrix.
template <typename Linear>
double LayerSeconds(const std::vector<Matrix>& layer, Linear linear) {
  return SecondsPerCall([&] {
    for (const Matrix& m : layer) linear(m);
  });
}

// The non-portable variants: benchmarked side by side at every row count (the portable loops
// exist for CPUs without AVX2 and take seconds at hundreds of rows).
template <typename Isa>
std::vector<Isa> VectorVariants(const std::vector<Isa>& supported) {
  std::vector<Isa> variants;
  for (const Isa isa : supported) {
    if (isa != Isa::kPortable) variants.push_back(isa);
  }
  return variants;
}

constexpr double kInt8BytesPerWeight = 1.0 + double{sizeof(cpu::Int8Scale)} / cpu::kInt8GroupSize;

void PrintInt8Header(const Args& args) {
  std::printf(" | %9s %7s %9s", "int8 ms", "int8 bw", "bf16/int8");
  if (!args.int8_variants) return;
  for (const cpu::Bf16Isa isa : VectorVariants(cpu::SupportedBf16Isas())) {
    std::printf(" %9s", ("i8 " + std::string(cpu::Bf16IsaName(isa))).c_str());
  }
  std::printf(" %9s", "i8 deq+sg");
}

// The int8 cells of one row count: LinearInt8's time, its weight bytes per second over the
// bandwidth, its speed-up over `t_bf16`; with --int8-variants each tile variant and
// dequantise-and-sgemm.
void PrintInt8Cells(const Args& args, const std::vector<Matrix>& layer, const float* x, float* y,
                    int64_t rows, double bytes, double bandwidth, double t_bf16) {
  const double t_int8 = LayerSeconds(layer, [&](const Matrix& m) {
    cpu::LinearInt8(x, m.int8.data(), m.scales.data(), y, rows, m.in, m.out);
  });
  std::printf(" | %9.3f %7.2f %9.2f", t_int8 * 1e3, bytes / t_int8 / bandwidth, t_bf16 / t_int8);
  if (!args.int8_variants) return;
  for (const cpu::Bf16Isa isa : VectorVariants(cpu::SupportedBf16Isas())) {
    const double t = LayerSeconds(layer, [&](const Matrix& m) {
      cpu::LinearInt8Tiled(isa, x, m.int8.data(), m.scales.data(), y, rows, m.in, m.out, false);
    });
    std::printf(" %9.3f", t * 1e3);
  }
  const double t = LayerSeconds(layer, [&](const Matrix& m) {
    cpu::LinearInt8DequantSgemm(x, m.int8.data(), m.scales.data(), y, rows, m.in, m.out, false);
  });
  std::printf(" %9.3f", t * 1e3);
}

// --activations 1: LinearBf16 with f32 activations against BF16-rounded ones.
void RunActivations(const Args& args) {
  const LayerShape& shape = args.shape;
  const std::vector<Matrix> layer = LayerMatrices(shape);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  const auto random_bf16 = [&](int64_t out, int64_t in) {
    Matrix m{.out = out, .in = in};
    m.bf16.resize(out * in);
    for (uint16_t& v : m.bf16) v = F32ToBf16(normal(rng));
    return m;
  };
  // The gate half of gate/up and the down projection, one matrix each.
  const Matrix gate = random_bf16(shape.intermediate, shape.hidden);
  const Matrix down = random_bf16(shape.hidden, shape.intermediate);
  constexpr int64_t kMaxRows = 32;
  std::vector<float> x(kMaxRows * std::max(shape.hidden, shape.intermediate)),
      y(kMaxRows * std::max(2 * shape.intermediate, shape.q_dim + 2 * shape.kv_dim));
  std::normal_distribution<float> unit;
  for (float& v : x) v = unit(rng);
  const std::string dot_isa(cpu::Bf16DotIsaName(cpu::SupportedBf16DotIsas().back()));
  std::printf(
      "%s: LinearBf16 with f32 activations against BF16-rounded ones (%s tiles); "
      "%d threads\n\n",
      shape.name.c_str(), dot_isa.c_str(), omp_get_max_threads());
  // Column 0: f32 activations (LinearBf16); then BF16 activations through each vector variant
  // (LinearBf16DotTiled: within the tiled range, what LinearBf16 runs; the last is its choice).
  const std::vector<cpu::Bf16DotIsa> dot_isas = VectorVariants(cpu::SupportedBf16DotIsas());
  const size_t columns = 1 + dot_isas.size();
  std::printf("%-22s %5s %10s", "projection", "rows", "f32 ms");
  for (const cpu::Bf16DotIsa isa : dot_isas) {
    std::printf(" %15s", ("bf16 " + std::string(cpu::Bf16DotIsaName(isa)) + " ms").c_str());
  }
  std::printf(" %9s\n", "f32/bf16");
  struct Target {
    std::string name;
    std::vector<const Matrix*> matrices;
  };
  const std::vector<Target> targets = {
      {std::to_string(gate.in) + " -> " + std::to_string(gate.out), {&gate}},
      {std::to_string(down.in) + " -> " + std::to_string(down.out), {&down}},
      {"layer (qkv,o,gate_up,down)", {&layer[0], &layer[1], &layer[2], &layer[3]}}};
  using Clock = std::chrono::steady_clock;
  for (const Target& t : targets) {
    std::vector<double> one(columns), sixteen(columns);
    for (int64_t rows = 1; rows <= kMaxRows; rows *= 2) {
      const auto call = [&](size_t column) {
        for (const Matrix* m : t.matrices) {
          if (column == 0) {
            cpu::LinearBf16(x.data(), m->bf16.data(), y.data(), rows, m->in, m->out);
          } else {
            cpu::LinearBf16DotTiled(dot_isas[column - 1], x.data(), m->bf16.data(), y.data(), rows,
                                    m->in, m->out, false);
          }
        }
      };
      // The best of kTrials calls, the columns alternating call by call: on a machine other
      // work shares, the best call is the one nothing interrupted.
      constexpr int kTrials = 40;
      std::vector<double> seconds(columns, 1e30);
      for (int trial = 0; trial < kTrials; ++trial) {
        for (size_t c = 0; c < columns; ++c) {
          call(c);  // warm
          const auto start = Clock::now();
          call(c);
          seconds[c] =
              std::min(seconds[c], std::chrono::duration<double>(Clock::now() - start).count());
        }
      }
      if (rows == 1) one = seconds;
      if (rows == 16) sixteen = seconds;
      std::printf("%-22s %5lld %10.3f", rows == 1 ? t.name.c_str() : "",
                  static_cast<long long>(rows), seconds[0] * 1e3);
      for (size_t c = 1; c < columns; ++c) std::printf(" %15.3f", seconds[c] * 1e3);
      std::printf(" %9.2f\n", seconds[0] / seconds.back());
    }
    std::printf("%-22s 16 rows / 1 row: f32 %.2f", "", sixteen[0] / one[0]);
    for (size_t c = 1; c < columns; ++c) {
      std::printf(", bf16 %s %.2f", std::string(cpu::Bf16DotIsaName(dot_isas[c - 1])).c_str(),
                  sixteen[c] / one[c]);
    }
    std::printf("\n\n");
  }
}

// The best of `trials` calls of each column, the columns alternating call by call (each call
// after a warm one): on a machine other work shares, the best call is the one nothing
// interrupted.
std::vector<double> BestAlternating(size_t columns, int trials,
                                    const std::function<void(size_t)>& call) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> seconds(columns, 1e30);
  for (int trial = 0; trial < trials; ++trial) {
    for (size_t c = 0; c < columns; ++c) {
      call(c);
      const auto start = Clock::now();
      call(c);
      seconds[c] =
          std::min(seconds[c], std::chrono::duration<double>(Clock::now() - start).count());
    }
  }
  return seconds;
}

// `rows` rows of random activations as wide as the layer's widest input, and room for `rows` rows
// of its widest output.
std::vector<float> RandomActivations(const LayerShape& shape, int64_t rows) {
  std::vector<float> x(rows * std::max(shape.hidden, shape.intermediate));
  std::mt19937 rng(3);
  std::normal_distribution<float> unit;
  for (float& v : x) v = unit(rng);
  return x;
}
std::vector<float> OutputRows(const LayerShape& shape, int64_t rows) {
  return std::vector<float>(rows *
                            std::max(2 * shape.intermediate, shape.q_dim + 2 * shape.kv_dim));
}

// --int8-activations 1: the quantised layer with f32 activations against int8 ones.
void RunInt8Activations(const Args& args) {
  const LayerShape& shape = args.shape;
  const std::vector<Matrix> layer = LayerMatrices(shape);
  const std::vector<int64_t> row_counts = {1, 2, 3, 4, 6, 8, 10, 12, 14, 16};
  const int64_t max_rows = row_counts.back();
  std::vector<float> x = RandomActivations(shape, max_rows), y = OutputRows(shape, max_rows);
  const std::vector<cpu::Int8DotIsa> dot_isas = VectorVariants(cpu::SupportedInt8DotIsas());
  // Where the CPU has AVX-512, the AVX2 f32 tiles too: what an AVX2 machine's int8 variants
  // (avx2, avxvnni) compete with there.
  const bool avx2_f32 = cpu::BestBf16Isa() == cpu::Bf16Isa::kAvx512;
  const size_t columns = 1 + dot_isas.size() + (avx2_f32 ? 1 : 0);
  std::printf(
      "%s layer (qkv, o, gate_up, down), int8 weights: f32 activations against int8 ones "
      "(LinearInt8 runs %s at one row, %s at 16); %d threads\n\n",
      shape.name.c_str(),
      std::string(cpu::Int8DotIsaName(cpu::Int8DotIsaFor(1, shape.hidden))).c_str(),
      std::string(cpu::Int8DotIsaName(cpu::Int8DotIsaFor(16, shape.hidden))).c_str(),
      omp_get_max_threads());
  std::printf("%5s %10s", "rows", "f32 ms");
  for (const cpu::Int8DotIsa isa : dot_isas) {
    std::printf(" %15s", ("int8 " + std::string(cpu::Int8DotIsaName(isa)) + " ms").c_str());
  }
  if (avx2_f32) std::printf(" %12s", "f32 avx2 ms");
  std::printf(" %10s %10s %10s\n", "f32/int8", "f32 /row", "int8 /row");
  const size_t best_int8 = dot_isas.size();  // the column of LinearInt8's variant
  std::vector<double> one;
  for (const int64_t rows : row_counts) {
    const std::vector<double> seconds = BestAlternating(columns, 40, [&](size_t column) {
      for (const Matrix& m : layer) {
        if (column == 0) {
          cpu::LinearInt8(x.data(), m.int8.data(), m.scales.data(), y.data(), rows, m.in, m.out);
        } else if (column > dot_isas.size()) {
          cpu::LinearInt8Tiled(cpu::Bf16Isa::kAvx2, x.data(), m.int8.data(), m.scales.data(),
                               y.data(), rows, m.in, m.out, false);
        } else {
          cpu::LinearInt8Dot(dot_isas[column - 1], x.data(), m.int8.data(), m.scales.data(),
                             y.data(), rows, m.in, m.out, false);
        }
      }
    });
    if (rows == 1) one = seconds;
    std::printf("%5lld %10.3f", static_cast<long long>(rows), seconds[0] * 1e3);
    for (size_t c = 1; c <= dot_isas.size(); ++c) std::printf(" %15.3f", seconds[c] * 1e3);
    if (avx2_f32) std::printf(" %12.3f", seconds.back() * 1e3);
    // Per row: the call's time over one row's, divided by the rows (1.0: rows cost nothing more).
    std::printf(" %10.2f %10.3f %10.3f\n", seconds[0] / seconds[best_int8],
                seconds[0] / one[0] / static_cast<double>(rows),
                seconds[best_int8] / one[best_int8] / static_cast<double>(rows));
    if (rows == max_rows) {
      std::printf("\n16 rows / 1 row: f32 %.2f", seconds[0] / one[0]);
      for (size_t c = 1; c <= dot_isas.size(); ++c) {
        std::printf(", int8 %s %.2f", std::string(cpu::Int8DotIsaName(dot_isas[c - 1])).c_str(),
                    seconds[c] / one[c]);
      }
      if (avx2_f32) std::printf(", f32 avx2 %.2f", seconds.back() / one.back());
      std::printf("\n");
    }
  }
}

// --int4 1: the layer as int8 weights against 4-bit ones, int8 activations.
void RunInt4(const Args& args) {
  const LayerShape& shape = args.shape;
  // Both layouts on huge pages, as the model holds its weights.
  struct Int4Matrix {
    int64_t out, in;
    HugePageArray<uint8_t> packed, panels;
    HugePageArray<cpu::Int8Scale> scales, panel_scales;
    cpu::Int4Matrix In(cpu::QuantLayout layout) const {
      if (layout == cpu::QuantLayout::kRows) return {packed.get(), scales.get()};
      return {panels.get(), panel_scales.get(), layout};
    }
  };
  std::vector<Matrix> int8;
  std::vector<Int4Matrix> int4;
  double bytes8 = 0, bytes4 = 0;
  for (int copy = 0; copy < 4; ++copy) {
    for (Matrix& m : LayerMatrices(shape)) {
      const int64_t groups = cpu::Int8Groups(m.in), panels = cpu::QuantPanels(0, m.out);
      Int4Matrix q{
          .out = m.out,
          .in = m.in,
          .packed = MakeHugePageArray<uint8_t>(m.out * cpu::Int4RowBytes(m.in)),
          .panels = MakeHugePageArray<uint8_t>(panels * cpu::Int4PanelBytes(m.in)),
          .scales = MakeHugePageArray<cpu::Int8Scale>(m.out * groups),
          .panel_scales = MakeHugePageArray<cpu::Int8Scale>(panels * cpu::QuantPanelScales(m.in))};
      cpu::QuantizeInt4Weights(m.f32.data(), m.out, m.in, q.packed.get(), q.scales.get());
      cpu::PackInt4Panels(q.packed.get(), q.scales.get(), m.out, m.in, q.panels.get(),
                          q.panel_scales.get());
      bytes8 += static_cast<double>(m.int8.size() + 2 * m.scales.size());
      bytes4 += static_cast<double>(m.out * (cpu::Int4RowBytes(m.in) + 2 * groups));
      m.f32 = {};
      m.bf16 = {};
      int8.push_back(std::move(m));
      int4.push_back(std::move(q));
    }
  }
  std::vector<float> x = RandomActivations(shape, 128), y = OutputRows(shape, 128);
  const double bandwidth = bench::ReadBandwidth();
  std::printf(
      "%s layer (qkv, o, gate_up, down) x 4 copies, int8 activations: int8 weights (%.0f MB) "
      "against 4-bit ones (%.0f MB); read bandwidth %.1f GB/s; %d threads\n\n",
      shape.name.c_str(), bytes8 / 1e6, bytes4 / 1e6, bandwidth / 1e9, omp_get_max_threads());
  // Each kernel on the layout LinearInt4 gets here where it reads that one, else on the other.
  const cpu::QuantLayout preferred = cpu::PreferredInt4Layout();
  const std::vector<cpu::Int4Kernel> kernels = cpu::SupportedInt4Kernels();
  const auto layout_of = [&](cpu::Int4Kernel kernel) {
    if (cpu::Int4KernelReads(kernel, preferred)) return preferred;
    return preferred == cpu::QuantLayout::kRows ? cpu::QuantLayout::kPanels
                                                : cpu::QuantLayout::kRows;
  };
  std::printf("4-bit weights in the %s layout (this CPU's)\n\n",
              std::string(cpu::QuantLayoutName(preferred)).c_str());
  std::printf("%5s %10s %10s %9s %9s %10s", "rows", "int8 ms", "int4 ms", "int8 bw", "int4 bw",
              "int8/int4");
  for (const cpu::Int4Kernel kernel : kernels) {
    std::printf(" %22s", (std::string(cpu::Int4KernelName(kernel)) + " ms").c_str());
  }
  std::printf("\n");
  for (const int64_t rows : {1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 17, 32, 64, 96, 128}) {
    const std::vector<double> seconds = BestAlternating(2 + kernels.size(), 20, [&](size_t column) {
      for (size_t i = 0; i < int8.size(); ++i) {
        const Int4Matrix& m4 = int4[i];
        if (column == 0) {
          const Matrix& m = int8[i];
          cpu::LinearInt8(x.data(), m.int8.data(), m.scales.data(), y.data(), rows, m.in, m.out,
                          false, 0, cpu::Int8Activations::kInt8);
        } else if (column == 1) {
          cpu::LinearInt4(x.data(), m4.In(preferred), y.data(), rows, m4.in, m4.out, false, 0,
                          cpu::Int8Activations::kInt8);
        } else {
          const cpu::Int4Kernel kernel = kernels[column - 2];
          cpu::LinearInt4Via(kernel, x.data(), m4.In(layout_of(kernel)), y.data(), rows, m4.in,
                             m4.out, false);
        }
      }
    });
    std::printf("%5lld %10.3f %10.3f %9.2f %9.2f %10.2f", static_cast<long long>(rows),
                seconds[0] * 1e3, seconds[1] * 1e3, bytes8 / seconds[0] / bandwidth,
                bytes4 / seconds[1] / bandwidth, seconds[0] / seconds[1]);
    for (size_t k = 0; k < kernels.size(); ++k) std::printf(" %22.3f", seconds[2 + k] * 1e3);
    std::printf("\n");
  }
}

// Multiply-adds a second of `op` on all threads, on zmm where the CPU has it (else ymm; the f32
// FMA's where it has neither, which is what the tiles then multiply with).
double MultiplyAddRate(bench::MultiplyAdd op) {
  const cpu::CpuFeatures& f = cpu::DetectedCpuFeatures();
  const bench::VectorWidth width = bench::CanRun(op, bench::VectorWidth::kZmm, f)
                                       ? bench::VectorWidth::kZmm
                                       : bench::VectorWidth::kYmm;
  if (!bench::CanRun(op, width, f)) {
    return op == bench::MultiplyAdd::kFmaF32 ? 0 : MultiplyAddRate(bench::MultiplyAdd::kFmaF32);
  }
  return bench::InstructionRate(op, width, omp_get_max_threads()) *
         bench::MultiplyAddsPerInstruction(op, width);
}

// --roofs 1: each weight format's layer against the machine's roof.
void RunRoofs(const Args& args) {
  const LayerShape& shape = args.shape;
  struct Quantized {
    int64_t out, in;
    std::vector<int8_t> int8, int8_other;  // in the layout the model loads, and the other one
    std::vector<uint8_t> int4;
    std::vector<cpu::Int8Scale> scales8, scales8_other, scales4;
    std::vector<uint16_t> bf16;
  };
  std::vector<Quantized> layers;
  const cpu::QuantLayout layout = cpu::PreferredInt4Layout();
  const cpu::QuantLayout int8_layout = cpu::PreferredInt8Layout(cpu::Int8Activations::kInt8);
  const cpu::QuantLayout int8_other = int8_layout == cpu::QuantLayout::kPanels
                                          ? cpu::QuantLayout::kRows
                                          : cpu::QuantLayout::kPanels;
  double params = 0;
  for (int copy = 0; copy < 4; ++copy) {
    for (Matrix& m : LayerMatrices(shape)) {
      Quantized q{.out = m.out, .in = m.in};
      q.int4.resize(m.out * cpu::Int4RowBytes(m.in));
      q.scales4.resize(m.out * cpu::Int8Groups(m.in));
      cpu::QuantizeInt4Weights(m.f32.data(), m.out, m.in, q.int4.data(), q.scales4.data());
      if (layout == cpu::QuantLayout::kPanels) {  // as the model loads them on this CPU
        std::vector<uint8_t> panels(cpu::QuantPanels(0, m.out) * cpu::Int4PanelBytes(m.in));
        std::vector<cpu::Int8Scale> scales(cpu::QuantPanels(0, m.out) *
                                           cpu::QuantPanelScales(m.in));
        cpu::PackInt4Panels(q.int4.data(), q.scales4.data(), m.out, m.in, panels.data(),
                            scales.data());
        q.int4 = std::move(panels);
        q.scales4 = std::move(scales);
      }
      std::vector<int8_t> panels(cpu::QuantPanels(0, m.out) * cpu::Int8PanelBytes(m.in));
      std::vector<cpu::Int8Scale> scales(cpu::QuantPanels(0, m.out) * cpu::QuantPanelScales(m.in));
      cpu::PackInt8Panels(m.int8.data(), m.scales.data(), m.out, m.in, panels.data(),
                          scales.data());
      const bool panels_first = int8_layout == cpu::QuantLayout::kPanels;
      q.int8 = panels_first ? std::move(panels) : std::move(m.int8);
      q.scales8 = panels_first ? std::move(scales) : std::move(m.scales);
      q.int8_other = panels_first ? std::move(m.int8) : std::move(panels);
      q.scales8_other = panels_first ? std::move(m.scales) : std::move(scales);
      q.bf16 = std::move(m.bf16);
      params += static_cast<double>(m.out * m.in);
      layers.push_back(std::move(q));
    }
  }
  const double scale_bytes = double{sizeof(cpu::Int8Scale)} / cpu::kInt8GroupSize;
  const double bytes[4] = {2.0 * params, (1.0 + scale_bytes) * params, (1.0 + scale_bytes) * params,
                           (0.5 + scale_bytes) * params};
  const cpu::Bf16Activations bf16_mode = cpu::PreferredBf16Activations();
  const double bandwidth = bench::ReadBandwidth();
  const double int8_rate = MultiplyAddRate(bench::MultiplyAdd::kDotInt8);
  const double rates[4] = {
      MultiplyAddRate(bf16_mode == cpu::Bf16Activations::kBf16 ? bench::MultiplyAdd::kDotBf16
                                                               : bench::MultiplyAdd::kFmaF32),
      int8_rate, int8_rate, int8_rate};
  std::printf(
      "%s layer (qkv, o, gate_up, down) x 4 copies: BF16 (%s activations) %.0f MB, int8 %.0f MB, "
      "4-bit %.0f MB; %d threads\ncpu: %s\nroofs: read bandwidth %.1f GB/s; %.0f G "
      "multiply-adds/s for BF16, %.0f G for int8 activations\n\n",
      shape.name.c_str(), std::string(cpu::Bf16ActivationsName(bf16_mode)).c_str(), bytes[0] / 1e6,
      bytes[1] / 1e6, bytes[3] / 1e6, omp_get_max_threads(), bench::KernelCpuFeatures().c_str(),
      bandwidth / 1e9, rates[0] / 1e9, rates[1] / 1e9);
  const std::string int8_name = "int8 " + std::string(cpu::QuantLayoutName(int8_layout));
  const std::string other_name = "int8 " + std::string(cpu::QuantLayoutName(int8_other));
  const char* names[4] = {"bf16", int8_name.c_str(), other_name.c_str(), "int4"};
  std::printf("%5s", "rows");
  for (const char* name : names) std::printf(" %12s ms %8s", name, "of roof");
  std::printf("\n");
  std::vector<float> x = RandomActivations(shape, 16), y = OutputRows(shape, 16);
  for (const int64_t rows : {1, 2, 4, 8, 16}) {
    const std::vector<double> seconds = BestAlternating(4, 10, [&](size_t column) {
      for (const Quantized& m : layers) {
        if (column == 0) {
          cpu::LinearBf16(x.data(), m.bf16.data(), y.data(), rows, m.in, m.out, false, 0,
                          bf16_mode);
        } else if (column == 1 || column == 2) {
          const bool loaded = column == 1;
          const cpu::Int8Matrix w{.values = loaded ? m.int8.data() : m.int8_other.data(),
                                  .scales = loaded ? m.scales8.data() : m.scales8_other.data(),
                                  .layout = loaded ? int8_layout : int8_other};
          cpu::LinearInt8(x.data(), w, y.data(), rows, m.in, m.out, false, 0,
                          cpu::Int8Activations::kInt8);
        } else {
          cpu::LinearInt4(x.data(), {m.int4.data(), m.scales4.data(), layout}, y.data(), rows, m.in,
                          m.out, false, 0, cpu::Int8Activations::kInt8);
        }
      }
    });
    std::printf("%5lld", static_cast<long long>(rows));
    for (size_t c = 0; c < 4; ++c) {
      const double roof = std::max(bytes[c] / bandwidth, rows * params / rates[c]);
      std::printf(" %15.3f %8.2f", seconds[c] * 1e3, roof / seconds[c]);
    }
    std::printf("\n");
  }
}

void Run(const Args& args) {
  const LayerShape& shape = args.shape;
  const std::vector<Matrix> layer = LayerMatrices(shape);
  int64_t params = 0, widest_in = 0, widest_out = 0;
  for (const Matrix& m : layer) {
    params += m.out * m.in;
    widest_in = std::max(widest_in, m.in);
    widest_out = std::max(widest_out, m.out);
  }
  const double bandwidth = bench::ReadBandwidth();
  const double sgemm = bench::SgemmRate();
  std::printf("%s layer projections: %.1f M weights (%.0f MB BF16); %d threads\n",
              shape.name.c_str(), params / 1e6, params * 2 / 1e6, omp_get_max_threads());
  std::printf("machine: read bandwidth %.1f GB/s, sgemm %.1f GFLOP/s (OpenBLAS %s kernels)\n",
              bandwidth / 1e9, sgemm / 1e9, cpu::OpenBlasCoreName().c_str());
  std::printf("cpu: %s\n\n", bench::KernelCpuFeatures().c_str());

  std::vector<float> x(args.max_rows * widest_in), y(args.max_rows * widest_out);
  std::mt19937 rng(2);
  std::normal_distribution<float> normal;
  for (float& v : x) v = normal(rng);

  const std::vector<cpu::Bf16Isa> tiled = VectorVariants(cpu::SupportedBf16Isas());
  std::printf("%5s  %10s %8s %8s %9s", "rows", "bf16 ms", "bw frac", "sgemm fr", "/roofline");
  for (const cpu::Bf16Isa isa : tiled) {
    std::printf(" %9s", (std::string(cpu::Bf16IsaName(isa)) + " ms").c_str());
  }
  std::printf(" %11s %10s %9s", "widen+sg ms", "f32 ms", "/roofline");
  PrintInt8Header(args);
  std::printf("\n");
  const auto run_layer = [&](auto linear) { return LayerSeconds(layer, linear); };
  for (int64_t rows = 1; rows <= args.max_rows; rows *= 2) {
    const double flops = 2.0 * rows * params;
    const auto roofline = [&](double bytes) { return std::max(bytes / bandwidth, flops / sgemm); };
    const double t_bf16 = run_layer([&](const Matrix& m) {
      cpu::LinearBf16(x.data(), m.bf16.data(), y.data(), rows, m.in, m.out);
    });
    const double bf16_bytes = 2.0 * params, f32_bytes = 4.0 * params;
    std::printf("%5lld  %10.3f %8.2f %8.2f %9.2f", static_cast<long long>(rows), t_bf16 * 1e3,
                bf16_bytes / t_bf16 / bandwidth, flops / t_bf16 / sgemm,
                t_bf16 / roofline(bf16_bytes));
    for (const cpu::Bf16Isa isa : tiled) {
      const double t = run_layer([&](const Matrix& m) {
        cpu::LinearBf16Tiled(isa, x.data(), m.bf16.data(), y.data(), rows, m.in, m.out, false);
      });
      std::printf(" %9.3f", t * 1e3);
    }
    const double t_widen = run_layer([&](const Matrix& m) {
      cpu::LinearBf16WidenSgemm(x.data(), m.bf16.data(), y.data(), rows, m.in, m.out, false);
    });
    const double t_f32 = run_layer(
        [&](const Matrix& m) { cpu::Linear(x.data(), m.f32.data(), y.data(), rows, m.in, m.out); });
    std::printf(" %11.3f %10.3f %9.2f", t_widen * 1e3, t_f32 * 1e3, t_f32 / roofline(f32_bytes));
    PrintInt8Cells(args, layer, x.data(), y.data(), rows, kInt8BytesPerWeight * params, bandwidth,
                   t_bf16);
    std::printf("\n");
  }

  std::printf("\none row by tile variant (fraction of bandwidth):\n");
  for (const cpu::Bf16Isa isa : cpu::SupportedBf16Isas()) {
    const double t = run_layer([&](const Matrix& m) {
      cpu::LinearBf16Tiled(isa, x.data(), m.bf16.data(), y.data(), 1, m.in, m.out, false);
    });
    std::printf("  bf16 %-8s %8.3f ms, %.2f of bandwidth\n",
                std::string(cpu::Bf16IsaName(isa)).c_str(), t * 1e3, 2.0 * params / t / bandwidth);
  }
  for (const cpu::Bf16Isa isa : cpu::SupportedBf16Isas()) {
    const double t = run_layer([&](const Matrix& m) {
      cpu::LinearInt8Tiled(isa, x.data(), m.int8.data(), m.scales.data(), y.data(), 1, m.in, m.out,
                           false);
    });
    std::printf("  int8 %-8s %8.3f ms, %.2f of bandwidth\n",
                std::string(cpu::Bf16IsaName(isa)).c_str(), t * 1e3,
                kInt8BytesPerWeight * params / t / bandwidth);
  }
}

}  // namespace
}  // namespace dscale

int main(int argc, char** argv) {
  dscale::cpu::ReexecForMatchingOpenBlasKernels(argv);
  const dscale::Args args = dscale::ParseArgs(argc, argv);
  if (args.roofs) {
    dscale::RunRoofs(args);
  } else if (args.int4) {
    dscale::RunInt4(args);
  } else if (args.int8_activations) {
    dscale::RunInt8Activations(args);
  } else if (args.activations) {
    dscale::RunActivations(args);
  } else {
    dscale::Run(args);
  }
  return 0;
}
