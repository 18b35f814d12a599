// The experts' share of a verify step on a mixture-of-experts target: one Qwen3-30B-A3B sparse
// layer's expert products (model/expert_products.h: 128 experts of 2048 → 768 → 2048, 8 a row,
// BF16 as stored) for r verified rows whose routes touch D distinct experts, from D = 8 (every
// row on the same 8 experts, what a dense target's rows cost) to D = min(8r, 128) (no expert
// shared). Each cell prints its time, the bytes of the D experts' weights it must read, and those
// bytes per second as a fraction of the read bandwidth measured at the start of the run
// (machine_limits.h); the last column is the time over the one-row step's.
//
// Consecutive calls route to disjoint experts where the 128 allow it, so the weights come from
// memory as in a model's step, not from the cache the previous call filled.
//
//   build/expert_cost_bench [--rows 1,2,4,8,16] [--activations f32|bf16] [--threads N]
// (--activations: dscale's default for this CPU unless given.)

#include <omp.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "core/dtype.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/openblas_kernels.h"
#include "machine_limits.h"
#include "model/expert_products.h"

namespace dscale {
namespace {

constexpr int64_t kHidden = 2048;
constexpr int64_t kExpertWidth = 768;
constexpr int32_t kExperts = 128;
constexpr int32_t kPerRow = 8;

struct Args {
  std::vector<int32_t> rows = {1, 2, 4, 8, 16};
  ActivationModes activations{.bf16 = cpu::PreferredBf16Activations()};  // dscale's default
};

std::vector<int32_t> ParseList(const std::string& text) {
  std::vector<int32_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    out.push_back(std::stoi(text.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

Args ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--rows") {
      a.rows = ParseList(value);
    } else if (flag == "--activations") {
      a.activations.bf16 =
          value == "bf16" ? cpu::Bf16Activations::kBf16 : cpu::Bf16Activations::kF32;
    } else if (flag == "--threads") {
      omp_set_num_threads(std::stoi(value));
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      std::exit(2);
    }
  }
  return a;
}

WeightMatrix RandomBf16(std::mt19937& rng, int64_t rows, int64_t cols) {
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<uint16_t> bits(static_cast<size_t>(rows * cols));
  for (uint16_t& b : bits) b = F32ToBf16(normal(rng));
  return WeightMatrix::FromBf16(std::move(bits), rows, cols);
}

SparseMlpWeights RandomExperts() {
  std::mt19937 rng(7);
  SparseMlpWeights moe;
  moe.router = RandomBf16(rng, kExperts, kHidden);  // unused here: routes are set by hand
  for (int32_t e = 0; e < kExperts; ++e) {
    moe.experts.push_back({.gate_up = RandomBf16(rng, 2 * kExpertWidth, kHidden),
                           .down = RandomBf16(rng, kHidden, kExpertWidth)});
  }
  return moe;
}

// Row i's 8 experts: (base + 8i + j) mod D over a window of D experts starting at `base`, so
// the rows touch exactly D distinct experts (8 ≤ D ≤ 8·rows).
std::vector<int32_t> Routes(int32_t rows, int32_t distinct, int32_t base) {
  std::vector<int32_t> ids(static_cast<size_t>(rows) * kPerRow);
  for (int32_t r = 0; r < rows; ++r) {
    for (int32_t j = 0; j < kPerRow; ++j) {
      ids[r * kPerRow + j] = (base + (r * kPerRow + j) % distinct) % kExperts;
    }
  }
  return ids;
}

double BytesOfExperts(int32_t distinct) {
  return 2.0 * distinct * 3.0 * kHidden * kExpertWidth;  // BF16: gate, up, down
}

void Run(const Args& a) {
  std::printf(
      "expert products of one Qwen3-30B-A3B layer (128 experts 2048 → 768, 8 a row, BF16)"
      "; cpu: %s; %d threads\n",
      bench::KernelCpuFeatures().c_str(), omp_get_max_threads());
  const double bandwidth = bench::ReadBandwidth();
  std::printf("read bandwidth %.1f GB/s\n\n", bandwidth / 1e9);
  const SparseMlpWeights moe = RandomExperts();
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::printf(
      "| rows | distinct experts | ms | expert MB | GB/s | of bandwidth | × 1-row step |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|\n");
  double one_row = 0;
  for (const int32_t rows : a.rows) {
    std::vector<float> normed(static_cast<size_t>(rows * kHidden));
    for (float& v : normed) v = normal(rng);
    std::vector<float> x(normed.size(), 0.0f);
    const std::vector<float> weights(static_cast<size_t>(rows) * kPerRow, 1.0f / kPerRow);
    ExpertScratch scratch;
    for (int32_t distinct = kPerRow; distinct <= std::min(kPerRow * rows, kExperts);
         distinct *= 2) {
      int32_t base = 0;
      const double s = bench::MedianSecondsPerCall(
          [&] {
            const std::vector<int32_t> ids = Routes(rows, distinct, base);
            base = (base + distinct) % kExperts;  // the next call reads other experts
            ExpertProducts(normed.data(), moe, kHidden, rows,
                           {.ids = ids.data(), .weights = weights.data(), .k = kPerRow},
                           a.activations, scratch, x.data());
          },
          0.3);
      if (one_row == 0) one_row = s;
      const double bytes = BytesOfExperts(distinct);
      std::printf("| %d | %d | %.2f | %.0f | %.1f | %.2f | %.2f |\n", rows, distinct, s * 1e3,
                  bytes / 1e6, bytes / s / 1e9, bytes / s / bandwidth, s / one_row);
      std::fflush(stdout);
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
