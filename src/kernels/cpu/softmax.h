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

// The `count` largest values of x[0, n), descending, into out[0, count) (equal values repeat as
// often as they occur); 1 ≤ count ≤ min(n, kMaxLargestValues), x free of NaN. One pass: a vector
// compare skips every block with nothing above the count-th largest value seen so far, which
// after the first few thousand values of a logit row is nearly every block.
inline constexpr int kMaxLargestValues = 64;
void LargestValues(const float* x, int64_t n, int count, float* out);

}  // namespace dscale::cpu
