#include "kernels/cpu/gemm.h"

#include <cblas.h>

#include <cstring>
#include <limits>

#include "core/check.h"

namespace dscale::cpu {
namespace {

// OpenBLAS takes 32-bit dimensions (blasint) in the build we link against.
bool FitsBlasInt(int64_t n) {
  return n >= 0 && n <= static_cast<int64_t>(std::numeric_limits<blasint>::max());
}

}  // namespace

bool EmptyProductDone(float* y, int64_t rows, int64_t in, int64_t out, int64_t ldy,
                      bool accumulate) {
  if (rows == 0 || out == 0) return true;
  if (in != 0) return false;
  if (!accumulate) {
    for (int64_t r = 0; r < rows; ++r) std::memset(y + r * ldy, 0, out * sizeof(float));
  }
  return true;
}

void Linear(const float* x, const float* w, float* y, int64_t rows, int64_t in, int64_t out,
            bool accumulate, int64_t ldy) {
  LinearF32Tiled(BestBf16Isa(), x, w, y, rows, in, out, accumulate, ldy);
}

void MatMul(const float* x, const float* w, float* y, int64_t rows, int64_t in, int64_t out) {
  DSCALE_CHECK(FitsBlasInt(rows) && FitsBlasInt(in) && FitsBlasInt(out));
  if (rows == 0 || out == 0) return;
  if (in == 0) {
    std::memset(y, 0, static_cast<size_t>(rows * out) * sizeof(float));
    return;
  }
  const auto m = static_cast<blasint>(rows);
  const auto n = static_cast<blasint>(out);
  const auto k = static_cast<blasint>(in);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, x, k, w, n, 0.0f, y, n);
}

void MatMulTransposedA(const float* a, const float* b, float* y, int64_t k, int64_t m, int64_t n) {
  DSCALE_CHECK(FitsBlasInt(k) && FitsBlasInt(m) && FitsBlasInt(n));
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::memset(y, 0, static_cast<size_t>(m * n) * sizeof(float));
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a, static_cast<blasint>(m), b,
              static_cast<blasint>(n), 0.0f, y, static_cast<blasint>(n));
}

}  // namespace dscale::cpu
