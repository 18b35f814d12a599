// The op table (tests/kernels/op_table.h) at Qwen3-1.7B's shapes: every op × format × variant
// this CPU runs under DSCALE_CPU_ISA, at each row's model shapes (1, 16 and 128 rows), timed, and
// set against the machine's limits measured in the same run (machine_limits.h): the bytes the
// call must move per second against the read bandwidth, its multiply-adds per second against
// half the sgemm FLOP rate, and the roofline — max(bytes ÷ bandwidth, multiply-adds ÷ rate) over
// the time — naming the limit that sets it. Prints a markdown table. Timing only: the parity
// test (op_parity_test.cc) checks the same cells' results at small shapes.
//
//   build/op_table_bench [--op NAME] [--format NAME] [--max-rows 128] [--fill-seconds 0.05]

#include <omp.h>
#include <xmmintrin.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "kernels/cpu/openblas_kernels.h"
#include "kernels/op_table.h"
#include "machine_limits.h"

namespace dscale {
namespace {

using testing::OpCall;
using testing::OpSpec;
using testing::OpVariant;

struct Args {
  std::string op, format;
  int64_t max_rows = 128;
  double fill_seconds = 0.05;
};

Args ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--op") {
      a.op = value;
    } else if (flag == "--format") {
      a.format = value;
    } else if (flag == "--max-rows") {
      a.max_rows = std::atoll(value.c_str());
    } else if (flag == "--fill-seconds") {
      a.fill_seconds = std::atof(value.c_str());
    } else {
      std::fprintf(stderr, "op_table_bench: unknown flag %s\n", flag.c_str());
      std::exit(2);
    }
  }
  return a;
}

struct Limits {
  double bandwidth = 0;  // bytes/s
  double madd_rate = 0;  // multiply-adds/s: half sgemm's FLOP/s
};

// One row of the markdown table: the cell, its time, and its rates against the limits.
void PrintCell(const OpSpec& op, testing::OpFormat format, const OpVariant& variant,
               const testing::OpShape& shape, double seconds, const Limits& limits) {
  const testing::OpCost cost = op.cost(shape, format);
  const double bytes_fraction = cost.bytes / seconds / limits.bandwidth;
  const double madds_fraction = cost.madds / seconds / limits.madd_rate;
  const bool memory_bound = cost.bytes / limits.bandwidth >= cost.madds / limits.madd_rate;
  std::printf("| %s | %s | %s | %s | %.1f | %.1f | %.2f | %.1f | %.2f | %.2f %s |\n",
              std::string(op.name).c_str(), std::string(testing::OpFormatName(format)).c_str(),
              variant.name.c_str(), testing::OpShapeName(shape).c_str(), seconds * 1e6,
              cost.bytes / seconds / 1e9, bytes_fraction, cost.madds / seconds / 1e9,
              madds_fraction, memory_bound ? bytes_fraction : madds_fraction,
              memory_bound ? "bw" : "mul");
  std::fflush(stdout);
}

// Each cell calls its op on its own output thousands of times, and an op applied to its own result
// (an elementwise gate, a state decayed again and again) drifts towards values so small that
// every multiply takes the CPU's slow path for subnormals, which no forward meets: they are
// flushed to zero on every thread for the timing.
void FlushSubnormalsOnEveryThread() {
#pragma omp parallel
  _mm_setcsr(_mm_getcsr() | _MM_FLUSH_ZERO_ON | 0x0040 /* denormals are zero */);
}

void Run(const Args& args) {
  FlushSubnormalsOnEveryThread();
  const Limits limits{.bandwidth = bench::ReadBandwidth(), .madd_rate = bench::SgemmRate() / 2};
  std::printf("read bandwidth %.1f GB/s, sgemm %.1f GFLOP/s (%.1f G multiply-adds/s), %s\n\n",
              limits.bandwidth / 1e9, 2 * limits.madd_rate / 1e9, limits.madd_rate / 1e9,
              "fractions: of the bandwidth (bytes moved), of the multiply-add rate, and of the "
              "roofline (bw: memory-bound, mul: compute-bound)");
  std::printf(
      "| op | format | variant | shape | µs | GB/s | of bw | GMAC/s | of mul | roofline |\n");
  std::printf("|---|---|---|---|---:|---:|---:|---:|---:|---:|\n");
  for (const OpSpec& op : testing::OpTable()) {
    if (!args.op.empty() && op.name != args.op) continue;
    for (const testing::OpFormat format : op.formats) {
      if (!args.format.empty() && testing::OpFormatName(format) != args.format) continue;
      for (const testing::OpShape& shape : op.model_shapes) {
        if (shape.rows > args.max_rows) continue;
        const OpCall call = op.make(shape, format, 1);
        std::vector<float> out = call.y0;
        for (const OpVariant& variant : op.variants(format)) {
          if (!variant.supported) continue;
          const double seconds = bench::MedianSecondsPerCall(
              [&] { op.run_variant(call, variant, out.data()); }, args.fill_seconds);
          PrintCell(op, format, variant, shape, seconds, limits);
        }
      }
    }
  }
}

}  // namespace
}  // namespace dscale

int main(int argc, char** argv) {
  dscale::cpu::ReexecForMatchingOpenBlasKernels(argv);
  dscale::Run(dscale::ParseArgs(argc, argv));
  return 0;
}
