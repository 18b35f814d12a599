#include "model/cuda/device_kv_cache.h"

#include "core/check.h"

namespace dscale::cuda {

DeviceKvCache::DeviceKvCache(const KvCacheShape& shape) : shape_(shape) {
  DSCALE_CHECK(shape.num_layers > 0 && shape.kv_heads > 0 && shape.head_dim > 0);
  DSCALE_CHECK(shape.page_size > 0 && shape.num_pages > 0);
  DSCALE_CHECK_MSG(num_slots() <= INT32_MAX, "device KV slots are int32");
  const auto count = static_cast<size_t>(num_slots() * row_floats());
  for (int32_t layer = 0; layer < shape.num_layers; ++layer) {
    k_.emplace_back(count);
    v_.emplace_back(count);
  }
}

int64_t DeviceKvCache::bytes() const {
  int64_t total = 0;
  for (size_t layer = 0; layer < k_.size(); ++layer) {
    total += static_cast<int64_t>(k_[layer].bytes() + v_[layer].bytes());
  }
  return total;
}

int64_t DeviceKvCache::BytesFor(const KvCacheShape& shape) {
  return int64_t{2} * shape.num_layers * shape.num_pages * shape.page_size * shape.kv_heads *
         shape.head_dim * static_cast<int64_t>(sizeof(float));
}

PagedKvLayer DeviceKvCache::Layer(int32_t layer) const {
  const auto index = static_cast<size_t>(layer);
  return {.k = k_.at(index).data(), .v = v_.at(index).data(), .page_size = shape_.page_size};
}

}  // namespace dscale::cuda
