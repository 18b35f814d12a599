#pragma once
// Row-wise softmax and argmax over logits on the device (same contracts as
// kernels/cpu/softmax.h; device pointers, work queued on `stream`).

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dscale::cuda {

// In place over x[rows, n]: numerically stable softmax of each row. Each row must hold at least
// one finite logit; −inf logits (masked tokens) become exact zeros.
void SoftmaxRows(float* x, int64_t rows, int64_t n, cudaStream_t stream);

// out[r] = index of the largest x[r, :]; ties go to the lowest index (deterministic greedy). A
// row with no comparable value (empty, or all NaN) yields 0.
void ArgmaxRows(const float* x, int64_t rows, int64_t n, int32_t* out, cudaStream_t stream);

}  // namespace dscale::cuda
