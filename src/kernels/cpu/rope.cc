#include "kernels/cpu/rope.h"

#include <cmath>
#include <vector>

#include "core/check.h"

namespace dscale::cpu {
namespace {

// Rotates every head of one row by the angles whose cosines and sines are cos_row/sin_row
// (half = head_dim/2 values each): (a, b) → (a·cos − b·sin, b·cos + a·sin) for the pair
// (x_i, x_{i+half}).
void RotateRow(float* row, const float* cos_row, const float* sin_row, int64_t heads,
               int64_t head_dim, int64_t half) {
  for (int64_t h = 0; h < heads; ++h) {
    float* lo = row + h * head_dim;
    float* hi = lo + half;
#pragma omp simd
    for (int64_t i = 0; i < half; ++i) {
      const float a = lo[i];
      const float b = hi[i];
      lo[i] = a * cos_row[i] - b * sin_row[i];
      hi[i] = b * cos_row[i] + a * sin_row[i];
    }
  }
}

constexpr int64_t kParallelMinValues = 1 << 20;

}  // namespace

void ApplyRope(float* x, const int32_t* positions, int64_t rows, int64_t heads, int64_t head_dim,
               int64_t row_stride, const RopeSpec& rope) {
  const int64_t rotated = rope.rotary_dim > 0 ? rope.rotary_dim : head_dim;
  DSCALE_CHECK_MSG(head_dim % 2 == 0 && rotated % 2 == 0 && rotated <= head_dim,
                   "RoPE needs an even head_dim and rotary_dim");
  const int64_t half = rotated / 2;
  if (rows == 0 || half == 0) return;
  // inv_freq[i] = RopeInvFreq(rope, i, rotated). The angle pos·inv_freq is formed in double: at
  // positions in the tens of thousands a float angle would already be off by ~1e-3 rad.
  std::vector<double> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    inv_freq[i] = RopeInvFreq(rope, i, rotated);
  }
#pragma omp parallel if (rows * heads * head_dim >= kParallelMinValues)
  {
    std::vector<float> cos_row(static_cast<size_t>(half));
    std::vector<float> sin_row(static_cast<size_t>(half));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const double pos = static_cast<double>(positions[r]);
      for (int64_t i = 0; i < half; ++i) {
        const double angle = pos * inv_freq[i];
        cos_row[i] = static_cast<float>(std::cos(angle));
        sin_row[i] = static_cast<float>(std::sin(angle));
      }
      RotateRow(x + r * row_stride, cos_row.data(), sin_row.data(), heads, head_dim, half);
    }
  }
}

}  // namespace dscale::cpu
