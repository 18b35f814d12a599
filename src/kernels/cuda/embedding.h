#pragma once
// Embedding lookup on the device (same contract as kernels/cpu/embedding.h; device pointers,
// work queued on `stream`).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/bf16.h"

namespace dscale::cuda {

// out[r, :] = table[ids[r], :] with table [vocab, dim], out [rows, dim]. Every id must lie in
// [0, vocab): callers validate request tokens before they reach a kernel. The ids live on the
// device, so the host cannot CHECK them; an id out of range traps the kernel instead, which
// poisons the CUDA context and aborts at the next checked call.
void EmbeddingGather(const float* table, int64_t vocab, int64_t dim, const int32_t* ids,
                     int64_t rows, float* out, cudaStream_t stream);

// The same gather from a BF16 table (the device target's resident embedding), widened to f32:
// out[r, :] = f32(table[ids[r], :]), exact. Same id contract.
void EmbeddingGatherBf16(const Bf16* table, int64_t vocab, int64_t dim, const int32_t* ids,
                         int64_t rows, float* out, cudaStream_t stream);

}  // namespace dscale::cuda
