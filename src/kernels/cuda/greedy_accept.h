#pragma once
// Greedy prefix verification on the device, over packed ragged rows: the contract of
// VerifyGreedy (spec/prefix_verifier.h) for every request of a bucket at once.
//
// Request i owns packed rows offsets[i] .. offsets[i] + k_i − 1: row 0 holds the anchor, row j
// the draft d_j, and the target's argmax at row j predicts the token after it. Drafts are
// accepted while d_{j+1} equals row j's argmax; the next token (the bonus when every draft
// passes, else the correction) is the argmax of the first mismatching row, or of row k_i − 1.
// The argmaxes come from ArgmaxRows (softmax.h), whose ties go to the lowest index like the
// CPU's, so from the same logits the results are exactly the CPU's.
//
// One thread per request; reads only k and offsets (what the packer wrote), so sentinel
// requests (k = 0) need no live count.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dscale::cuda {

//   target_argmax: [rows] the target's argmax at each packed row (rows ≥ offsets[bucket])
//   tokens:        [rows] the packed tokens the target verified
//   k, offsets:    [bucket], [bucket + 1] as written by Pack (dvl_pack.h)
//   accepted:      [bucket] drafts accepted, 0 .. k_i − 1; 0 for requests with k_i ≤ 0
//   next_token:    [bucket] the token after the accepted prefix; −1 for requests with k_i ≤ 0
// Device pointers; queued on `stream` (graph-capturable).
void VerifyGreedyPacked(const int32_t* target_argmax, const int32_t* tokens, const int32_t* k,
                        const int32_t* offsets, int32_t bucket, int32_t* accepted,
                        int32_t* next_token, cudaStream_t stream);

}  // namespace dscale::cuda
