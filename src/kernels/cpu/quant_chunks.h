#pragma once
// Products over a quantised matrix in a layout the call's kernel does not read (4-bit values,
// gemm_int4.h; int8 panels without AVX512-VNNI or with f32 activations, gemm_int8.h): each thread
// takes chunks of outputs, copies a chunk into the int8 rows layout (about 64 KiB, in L2 while the
// int8 kernel reads it) and runs the int8 kernel of the call's activations mode on it, on the
// calling thread (the kernel's own parallel loops are nested and inactive there). Every output
// has the bits LinearInt8 gives on the rows layout.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/gemm_int8.h"

namespace dscale::cpu {

// Bytes of int8 values per chunk, and the multiple its output count is rounded to (the widest
// int8 panel: 16 outputs).
inline constexpr int64_t kQuantChunkBytes = int64_t{64} << 10;
inline constexpr int64_t kQuantChunkAlign = 16;
// Below this many weights a call runs on one thread (as the int8 kernels decide).
inline constexpr int64_t kQuantChunksParallelMinWeights = int64_t{1} << 16;

inline int64_t QuantChunkOutputs(int64_t in) {
  return std::max(kQuantChunkAlign, kQuantChunkBytes / in / kQuantChunkAlign * kQuantChunkAlign);
}

// y[rows, out] (rows `ldy` apart; += with `accumulate`) from chunks unpack(o0, n, dst, dst_scales)
// writes: outputs [o0, o0 + n) as dst[n, in] int8 values and dst_scales[n, Int8Groups(in)].
// int8_dot: activations already quantised in xq (Int8Activations::kInt8); else x as f32.
template <typename Unpack>
void UnpackedChunks(const float* x, const Int8ActivationRows& xq, int64_t rows,
                    const Unpack& unpack, int64_t in, int64_t out, float* y, int64_t ldy,
                    bool accumulate, bool int8_dot) {
  const int64_t groups = Int8Groups(in);
  const Int8DotIsa isa = Int8DotIsaFor(rows, in);
  const int64_t chunk = QuantChunkOutputs(in);
  const int64_t chunks = (out + chunk - 1) / chunk;
#pragma omp parallel if (in * out >= kQuantChunksParallelMinWeights)
  {
    thread_local std::vector<int8_t> values;
    thread_local std::vector<Int8Scale> scales;
    values.resize(static_cast<size_t>(chunk * in));
    scales.resize(static_cast<size_t>(chunk * groups));
#pragma omp for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t o0 = c * chunk, n = std::min(chunk, out - o0);
      unpack(o0, n, values.data(), scales.data());
      if (int8_dot) {
        LinearInt8DotQuantized(isa, xq, rows, values.data(), scales.data(), in, n, y + o0, ldy,
                               accumulate);
      } else {
        LinearInt8(x, values.data(), scales.data(), y + o0, rows, in, n, accumulate, ldy,
                   Int8Activations::kF32);
      }
    }
  }
}

}  // namespace dscale::cpu
