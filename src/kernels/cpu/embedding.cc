#include "kernels/cpu/embedding.h"

#include <cstring>

#include "core/check.h"

namespace dscale::cpu {

void EmbeddingGather(const float* table, int64_t vocab, int64_t dim, const int32_t* ids,
                     int64_t rows, float* out) {
  const size_t row_bytes = static_cast<size_t>(dim) * sizeof(float);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t id = ids[r];
    DSCALE_CHECK_MSG(id >= 0 && id < vocab, "token id outside the embedding table");
    std::memcpy(out + r * dim, table + id * dim, row_bytes);
  }
}

}  // namespace dscale::cpu
