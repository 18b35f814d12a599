#pragma once
// BF16 values on the device, and the f32 → BF16 rounding the BF16 GEMMs feed on.
//
// Bf16 is a plain 16-bit container (the upper half of an f32's bits), so host code compiled
// without nvcc can hold and pass BF16 buffers; the kernels reinterpret it as __nv_bfloat16.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dscale::cuda {

struct Bf16 {
  uint16_t bits = 0;
};
static_assert(sizeof(Bf16) == 2, "Bf16 must have the layout of __nv_bfloat16");

// out[i] = x[i] rounded to BF16, to nearest even: the same bits as core/dtype.h's F32ToBf16 for
// every input (NaN included). Device pointers; queued on `stream` (graph-capturable).
void ConvertToBf16(const float* x, Bf16* out, int64_t n, cudaStream_t stream);

}  // namespace dscale::cuda
