#pragma once
// The machine's own limits, measured by a benchmark in the same run as what it compares with
// them (machines, and shared ones especially, differ from run to run): the memory read bandwidth
// and the sgemm rate.

#include <cblas.h>

#include <cstdint>
#include <vector>

#include "bench_timing.h"

namespace dscale::bench {

// Bytes per second all threads read when summing a 1 GiB buffer: 64-bit integer words into
// eight independent sums per thread (associative, so the loop is limited by loads, not adds).
inline double ReadBandwidth() {
  const size_t words = (size_t{1} << 30) / sizeof(uint64_t);
  std::vector<uint64_t> buffer(words, 1);
  volatile uint64_t sink = 0;
  const double s = MedianSecondsPerCall(
      [&] {
        uint64_t total = 0;
#pragma omp parallel for reduction(+ : total) schedule(static)
        for (size_t block = 0; block < words / 8; ++block) {
          const uint64_t* p = buffer.data() + block * 8;
          total += (p[0] + p[1]) + (p[2] + p[3]) + (p[4] + p[5]) + (p[6] + p[7]);
        }
        sink = total;
      },
      0.2);
  (void)sink;
  return static_cast<double>(words * sizeof(uint64_t)) / s;
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
