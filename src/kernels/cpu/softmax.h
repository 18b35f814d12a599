#pragma once
// Row-wise softmax and argmax over logits.

#include <cstdint>

namespace dscale::cpu {

// In place over x[rows, n]: numerically stable softmax of each row.
void SoftmaxRows(float* x, int64_t rows, int64_t n);

// The two sums a softmax summary needs, over x[0, n) shifted by `shift` ≥ max x (so every
// exponent is ≤ 0): sum = Σ e^(x − shift) and weighted = Σ e^(x − shift)·(x − shift).
// Then log p_max = (max − shift) − log sum and entropy = log sum − weighted / sum.
// Accumulated in double across blocks of float vector lanes.
struct ExpMoments {
  double sum = 0.0;
  double weighted = 0.0;
};
ExpMoments ShiftedExpMoments(const float* x, int64_t n, float shift);

// out[r] = index of the largest x[r, :]; ties go to the lowest index (deterministic greedy).
void ArgmaxRows(const float* x, int64_t rows, int64_t n, int32_t* out);

}  // namespace dscale::cpu
