#pragma once
// The flat-buffer packer on the device (paper Eq. packmap, Algorithm 1 lines 10–15): the
// contract of dvl::Pack (dvl/flat_pack.h) writing into a bucket's fixed-address buffers.
//
// For the N = step->live_count live requests with lengths k_i:
//   offsets[0] = 0, offsets[i + 1] = offsets[i] + k_i,  M_live = offsets[N]
//   field[offsets[i] + j] = field_i[j] for 0 ≤ j < k_i   (tokens, positions, KV slots)
// then the same sentinels and placeholders as the CPU:
//   k_i = 0 and offsets[i + 1] = M_live for N ≤ i < N_bs,
//   rows M_live ≤ s < M_bs: token 0, position 0, KV slot = request 0's anchor slot.
// So the outputs are the same bits as dvl::Pack's for the same inputs.
//
// One block: thread 0 forms the offsets in shared memory (N_bs ≤ a few dozen, so a serial sum
// is cheaper than a scan's barriers), then every thread fills rows, each finding its row's
// request by binary search over the offsets (the paper's per-slot boundary scan).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/dvl_device.h"

namespace dscale::cuda {

// The bucket's packed verification buffer, device pointers.
struct PackedRows {
  int32_t* tokens = nullptr;     // [capacity]
  int32_t* positions = nullptr;  // [capacity]
  int32_t* kv_slots = nullptr;   // [capacity]
  int32_t* k = nullptr;          // [bucket]
  int32_t* offsets = nullptr;    // [bucket + 1]
};

// Packs the live requests' first k_i block rows into `out`.
//   tokens, positions, kv_slots: [bucket, width] draft blocks, row j = 0 the anchor; only the
//                                live requests' rows are read
//   k:        [bucket] lengths; k[i] for i < N is read (1 ≤ k_i ≤ width); may alias out.k
//   bucket:   N_bs ≥ 1; capacity: M_bs ≥ Σ k_i; width ≥ 1
//   step:     device DvlStep; 1 ≤ live_count ≤ bucket
// Inputs outside the contract (which dvl::Pack rejects with an error) give unspecified rows,
// but nothing is read or written out of bounds. Device pointers; queued on `stream`, no
// allocation or synchronisation (graph-capturable). bucket ≤ 8192.
void Pack(const int32_t* tokens, const int32_t* positions, const int32_t* kv_slots,
          const int32_t* k, int32_t bucket, int64_t capacity, int width, const DvlStep* step,
          const PackedRows& out, cudaStream_t stream);

}  // namespace dscale::cuda
