#pragma once
// Seeded pseudo-random and constant fills on the device, for weights and caches that only need
// plausible values (benchmarks): a multi-gigabyte checkpoint is made where it lives instead of
// being built on the host and copied.
//
// Element i of a fill depends only on (seed, i) — a counter-based hash, no state — so the same
// call gives the same values on every device and in any launch order.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/bf16.h"

namespace dscale::cuda {

// out[i] uniform in [low, high), rounded to BF16.
void FillUniformBf16(Bf16* out, int64_t n, uint64_t seed, float low, float high,
                     cudaStream_t stream);

// out[i] uniform in [low, high).
void FillUniform(float* out, int64_t n, uint64_t seed, float low, float high, cudaStream_t stream);

// out[i] = value.
void FillConstant(float* out, int64_t n, float value, cudaStream_t stream);

}  // namespace dscale::cuda
