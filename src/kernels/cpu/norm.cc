#include "kernels/cpu/norm.h"

#include <cmath>

namespace dscale::cpu {
namespace {

// Σ x[i]² over n values. `omp simd` lets the compiler split the sum over vector lanes (float
// partial sums, one per lane); with n in the thousands each lane adds a few hundred terms,
// which keeps the relative error far below the 1e-5 parity bar.
float SumSquares(const float* x, int64_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
  return sum;
}

// y[i] = x[i] · inv_rms · weight[i] for n values; y may alias x.
void ScaleByWeight(const float* x, const float* weight, float inv_rms, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * inv_rms * weight[i];
}

float InverseRms(const float* x, int64_t n, float eps) {
  const double mean = static_cast<double>(SumSquares(x, n)) / static_cast<double>(n);
  return static_cast<float>(1.0 / std::sqrt(mean + static_cast<double>(eps)));
}

// Rows are independent; below this many values per call the fork/join costs more than it saves.
constexpr int64_t kParallelMinValues = 1 << 20;

}  // namespace

void RmsNorm(const float* x, const float* weight, float* y, int64_t rows, int64_t dim, float eps) {
  if (dim == 0) return;
#pragma omp parallel for schedule(static) if (rows * dim >= kParallelMinValues)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    ScaleByWeight(xr, weight, InverseRms(xr, dim, eps), y + r * dim, dim);
  }
}

void HeadRmsNorm(float* x, const float* weight, int64_t rows, int64_t heads, int64_t head_dim,
                 int64_t row_stride, float eps) {
  if (head_dim == 0) return;
#pragma omp parallel for schedule(static) if (rows * heads * head_dim >= kParallelMinValues)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      float* xh = x + r * row_stride + h * head_dim;
      ScaleByWeight(xh, weight, InverseRms(xh, head_dim, eps), xh, head_dim);
    }
  }
}

}  // namespace dscale::cpu
