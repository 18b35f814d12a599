#pragma once
// Attention spans of a bucket's packed verification rows, formed on the device from what the
// packer wrote (paper Algorithm 2, the qStart/qEnd and historyKV lines): request i's span starts
// at offsets[i] and holds k_i rows after ctx_len_i committed positions, reading its page table
// from a fixed per-bucket table. Because this runs inside the verification graph, changed
// lengths and boundaries reach attention without the host touching the spans.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/attention.h"

namespace dscale::cuda {

// For every i < bucket:
//   spans[i] = {q_start = offsets[i], q_len = k[i], ctx_len = ctx_len[i],
//               page_table = page_tables + i · pages_per_request}
// Sentinels (k = 0) get q_len 0, so attention launches their blocks and they exit at once.
//   k, offsets:   [bucket], [bucket + 1] as written by Pack (dvl_pack.h)
//   ctx_len:      [bucket] committed positions before each request's block
//   page_tables:  [bucket, pages_per_request] page ids, each row covering ctx_len + k positions
// Device pointers; queued on `stream` (graph-capturable).
void BuildVerifySpans(const int32_t* k, const int32_t* offsets, const int32_t* ctx_len,
                      const int32_t* page_tables, int32_t pages_per_request, int32_t bucket,
                      StepSpan* spans, cudaStream_t stream);

}  // namespace dscale::cuda
