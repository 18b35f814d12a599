#pragma once
// The machine's own limits, measured by a benchmark in the same run as what it compares with
// them (machines, and shared ones especially, differ from run to run): the memory read bandwidth
// and the sgemm rate.

#include <cblas.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/isa_targets.h"

namespace dscale::bench {

namespace detail {

constexpr size_t kProbeBytes = size_t{1} << 30;
constexpr size_t kStreamsPerThread = 4;  // independent sequential streams, as a GEMM tile reads
constexpr size_t kPrefetchWords = 128;   // 1 KiB ahead of each stream

// Each thread sums its quarter-slices of its share of the buffer, one cache line of each of
// kStreamsPerThread streams in turn, with 256-bit loads and a software prefetch ahead: the
// access pattern of the weight kernels at their best.
DSCALE_AVX2 inline uint64_t SumLinesAvx2(const uint64_t* words, size_t lines) {
  uint64_t total = 0;
#pragma omp parallel reduction(+ : total)
  {
    const size_t threads = omp_get_num_threads();
    const size_t per_stream = lines / threads / kStreamsPerThread;
    const uint64_t* base = words + omp_get_thread_num() * per_stream * kStreamsPerThread * 8;
    __m256i low = _mm256_setzero_si256(), high = _mm256_setzero_si256();
    for (size_t line = 0; line < per_stream; ++line) {
      for (size_t stream = 0; stream < kStreamsPerThread; ++stream) {
        const uint64_t* p = base + (stream * per_stream + line) * 8;
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchWords), _MM_HINT_T0);
        low = _mm256_add_epi64(low, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        high = _mm256_add_epi64(high, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 4)));
      }
    }
    if (omp_get_thread_num() == 0) {  // the lines the even split left over
      for (size_t line = per_stream * kStreamsPerThread * threads; line < lines; ++line) {
        for (size_t w = 0; w < 8; ++w) total += words[line * 8 + w];
      }
    }
    alignas(32) uint64_t lanes[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_add_epi64(low, high));
    total += lanes[0] + lanes[1] + lanes[2] + lanes[3];
  }
  return total;
}

// 64-bit words into eight independent sums per thread (associative, so the loop is limited by
// loads, not adds): the probe for CPUs without AVX2.
inline uint64_t SumLinesScalar(const uint64_t* words, size_t lines) {
  uint64_t total = 0;
#pragma omp parallel for reduction(+ : total) schedule(static)
  for (size_t line = 0; line < lines; ++line) {
    const uint64_t* p = words + line * 8;
    total += (p[0] + p[1]) + (p[2] + p[3]) + (p[4] + p[5]) + (p[6] + p[7]);
  }
  return total;
}

}  // namespace detail

// Bytes per second all threads read from a 1 GiB buffer: the faster of the two probes above
// (vector loads read 15-25% faster than scalar ones on the AMD EPYC this was written on, so a
// scalar-only probe would let a kernel appear to beat the machine's bandwidth).
inline double ReadBandwidth() {
  const size_t words = detail::kProbeBytes / sizeof(uint64_t);
  const size_t lines = words / 8;
  std::vector<uint64_t> buffer(words, 1);
  volatile uint64_t sink = 0;
  const auto rate = [&](uint64_t (*sum)(const uint64_t*, size_t)) {
    const double s = MedianSecondsPerCall([&] { sink = sum(buffer.data(), lines); }, 0.2);
    return static_cast<double>(detail::kProbeBytes) / s;
  };
  double best = rate(detail::SumLinesScalar);
  // The machine's limit, not the kernels': the CPU as detected, whatever DSCALE_CPU_ISA allows.
  if (cpu::DetectedCpuFeatures().Avx2Fma()) best = std::max(best, rate(detail::SumLinesAvx2));
  (void)sink;
  return best;
}

// "avx avx2 fma ... (DSCALE_CPU_ISA amx)": the CPU features the kernels dispatch on and the cap
// that left them, for a benchmark's header, so a result names the variants it measured.
inline std::string KernelCpuFeatures() {
  return cpu::CpuFeaturesString(cpu::CpuFeaturesInUse()) + " (" + cpu::kCpuIsaCapVariable + " " +
         std::string(cpu::CpuIsaCapName(cpu::CpuIsaCapFromEnvironment())) + ")";
}

// FLOP/s of OpenBLAS sgemm on 1024 × 2048 × 2048 (f32, all threads).
inline double SgemmRate() {
  const int m = 1024, k = 2048, n = 2048;
  std::vector<float> a(size_t{m} * k, 0.5f), b(size_t{k} * n, 0.25f), c(size_t{m} * n);
  const double s = MedianSecondsPerCall(
      [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a.data(), k, b.data(),
                    k, 0.0f, c.data(), n);
      },
      0.2);
  return 2.0 * m * n * k / s;
}

}  // namespace dscale::bench
