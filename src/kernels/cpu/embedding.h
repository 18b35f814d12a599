#pragma once

#include <cstdint>

namespace dscale::cpu {

// out[r, :] = table[ids[r], :] with table [vocab, dim], out [rows, dim]. Every id must lie in
// [0, vocab): callers validate request tokens before they reach a kernel (CHECKed here).
void EmbeddingGather(const float* table, int64_t vocab, int64_t dim, const int32_t* ids,
                     int64_t rows, float* out);

}  // namespace dscale::cpu
