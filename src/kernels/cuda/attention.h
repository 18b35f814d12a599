#pragma once
// Attention over a paged KV cache for a packed ragged batch, on the device.
//
// The parameters are the CPU kernel's (kernels/cpu/attention.h), with the same meaning, except
// that every pointer is a device pointer: q, out, kv.k, kv.v, the spans array, and each span's
// page_table. Because the spans live on the device, the host cannot see the batch's shape, so
// the caller also passes max_q_len, the largest q_len among the spans (a larger value only
// launches blocks that exit at once; a smaller one leaves rows unwritten).
//
// Launch geometry: grid (num_spans, heads, ⌈max_q_len / kTileRows⌉). One block takes one query
// tile — up to kTileRows consecutive rows of one span — for one query head. It holds the tile's
// queries in shared memory, walks the keys its rows can see in chunks, and keeps a running
// (online) softmax per row, so each key and value row is read once per tile instead of once per
// query row. The tile height is the path-aware tile router's hook, as on the CPU: 16 for
// verification and drafting, 128 for prefill.
//
// Shared memory grows with kTileRows · head_dim: about 154 KiB at 128 × 128, which fits the
// A100 (sm_80, 163 KiB per block) and Hopper (227 KiB). A tile that does not fit the device is
// a CHECK failure naming the sizes.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cpu/attention.h"

namespace dscale::cuda {

using AttentionParams = cpu::AttentionParams;
using PagedKvLayer = cpu::PagedKvLayer;
using cpu::kAttentionTileHeights;

template <int kTileRows>
void PagedAttentionTiled(const AttentionParams& params, int32_t max_q_len, cudaStream_t stream);

// Dispatches to the compiled tile height `tile_rows` (one of kAttentionTileHeights; CHECKed).
void PagedAttention(const AttentionParams& params, int32_t max_q_len, int tile_rows,
                    cudaStream_t stream);

}  // namespace dscale::cuda
