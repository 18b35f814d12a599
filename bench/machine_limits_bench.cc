// The machine's limits that the CPU kernels are judged against, on one core and on all of them:
// the memory read bandwidth (machine_limits.h's probe) and the sustained issue rate of
// vfmadd231ps, vdpbf16ps and vpdpbusd on zmm and ymm vectors (instruction_rates.h), each also as
// multiply-adds a second. docs/BENCHMARKS.md, "The machine's limits", keeps one table per CPU
// class.
//
//   build/machine_limits_bench

#include <omp.h>

#include <cstdio>
#include <string>

#include "instruction_rates.h"
#include "kernels/cpu/cpu_features.h"
#include "machine_limits.h"

namespace dscale {
namespace {

// The read bandwidth with `threads` threads.
double ReadBandwidthOn(int threads) {
  const int all = omp_get_max_threads();
  omp_set_num_threads(threads);
  const double bandwidth = bench::ReadBandwidth();
  omp_set_num_threads(all);
  return bandwidth;
}

int Run() {
  const int cores = omp_get_max_threads();
  const cpu::CpuFeatures& features = cpu::DetectedCpuFeatures();
  std::printf("CPU features: %s; %d threads\n\n", cpu::CpuFeaturesString(features).c_str(), cores);
  std::printf("%-28s %14s %14s\n", "limit", "1 thread",
              (std::to_string(cores) + " threads").c_str());
  std::printf("%-28s %11.1f GB/s %11.1f GB/s\n", "read bandwidth", ReadBandwidthOn(1) / 1e9,
              ReadBandwidthOn(cores) / 1e9);
  using bench::MultiplyAdd;
  using bench::VectorWidth;
  for (const MultiplyAdd op :
       {MultiplyAdd::kFmaF32, MultiplyAdd::kDotBf16, MultiplyAdd::kDotInt8}) {
    for (const VectorWidth width : {VectorWidth::kZmm, VectorWidth::kYmm}) {
      const std::string name =
          std::string(bench::MultiplyAddName(op)) + (width == VectorWidth::kZmm ? " zmm" : " ymm");
      if (!bench::CanRun(op, width, features)) {
        std::printf("%-28s %14s %14s\n", name.c_str(), "(not here)", "");
        continue;
      }
      const int per = bench::MultiplyAddsPerInstruction(op, width);
      const double one = bench::InstructionRate(op, width, 1);
      const double all = bench::InstructionRate(op, width, cores);
      std::printf("%-28s %10.2f G/s %10.2f G/s   (%.1f / %.1f G multiply-adds/s)\n", name.c_str(),
                  one / 1e9, all / 1e9, one * per / 1e9, all * per / 1e9);
    }
  }
  return 0;
}

}  // namespace
}  // namespace dscale

int main() { return dscale::Run(); }
