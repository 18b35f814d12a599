#pragma once
// Row-wise softmax and argmax over logits.

#include <cstdint>

namespace dscale::cpu {

// In place over x[rows, n]: numerically stable softmax of each row.
void SoftmaxRows(float* x, int64_t rows, int64_t n);

// out[r] = index of the largest x[r, :]; ties go to the lowest index (deterministic greedy).
void ArgmaxRows(const float* x, int64_t rows, int64_t n, int32_t* out);

}  // namespace dscale::cpu
