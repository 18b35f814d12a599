#pragma once
// The target's paged K/V rows on the device: per layer [num_slots, kv_heads, head_dim] f32 for
// K and for V, addressed by slot = page · page_size + offset exactly like the CPU KvStore
// (kv/paged_kv_cache.h). Page allocation and page tables stay with the host's PagedKvCache;
// only the rows live here, and attention reads them through device copies of the page tables.

#include <cstdint>
#include <vector>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_check.h"
#include "kv/paged_kv_cache.h"

namespace dscale::cuda {

class DeviceKvCache {
 public:
  // Allocates every layer's rows (contents unspecified until written).
  explicit DeviceKvCache(const KvCacheShape& shape);
  DeviceKvCache() = default;  // no rows (a placeholder before re-allocation)

  const KvCacheShape& shape() const { return shape_; }
  int64_t num_slots() const { return int64_t{shape_.num_pages} * shape_.page_size; }
  int64_t row_floats() const { return int64_t{shape_.kv_heads} * shape_.head_dim; }
  int64_t bytes() const;
  // Bytes a cache of `shape` allocates.
  static int64_t BytesFor(const KvCacheShape& shape);

  float* k(int32_t layer) { return k_.at(static_cast<size_t>(layer)).data(); }
  float* v(int32_t layer) { return v_.at(static_cast<size_t>(layer)).data(); }
  // Device pointers for the attention kernel.
  PagedKvLayer Layer(int32_t layer) const;

 private:
  KvCacheShape shape_;
  std::vector<DeviceBuffer<float>> k_;
  std::vector<DeviceBuffer<float>> v_;
};

}  // namespace dscale::cuda
