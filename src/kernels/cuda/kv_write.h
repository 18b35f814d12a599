#pragma once
// Stores the K and V rows of a packed batch into a paged KV cache layer on the device: the
// device version of the CPU layer's KvStore::Store loop (model/decoder_layer.cc).

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dscale::cuda {

// For every row r < live: k_cache[slots[r], :] = k[r · row_stride + 0 .. kv_dim) and likewise
// v_cache from v (k and v usually point into one fused QKV row). The caches are
// [num_slots, kv_dim] f32 (kv_dim = kv_heads · head_dim).
//
// live = *live_rows when live_rows is non-null (a device scalar), else rows. Rows at or past it
// are padding: a bucket's tail placeholders carry request 0's anchor slot (dvl_pack.h), and
// storing their keys there would race with the anchor's own row. Because the count is read on
// the device, one captured graph serves every live row count. Device pointers; queued on
// `stream` (graph-capturable). Slots must lie in [0, num_slots): callers take them from the
// cache's own page tables.
void StoreKvRows(const float* k, const float* v, int64_t row_stride, const int32_t* slots,
                 int64_t rows, const int32_t* live_rows, int64_t kv_dim, float* k_cache,
                 float* v_cache, cudaStream_t stream);

}  // namespace dscale::cuda
