#pragma once
// The output builder on the device (paper Fig. arch, Algorithm 2): from the prefix verifier's
// accepted counts and next tokens, each request's committed tokens for this step — the accepted
// drafts followed by the next token — laid out so the state commit reads them with one copy.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dscale::cuda {

// For every i < bucket with k_i ≥ 1 (a = accepted[i], row0 = offsets[i]):
//   committed[i] = a + 1
//   out_tokens[i, j] = tokens[row0 + 1 + j] for j < a (the accepted drafts),
//                      next_token[i] for j = a, −1 for a < j < width
// Sentinels (k_i ≤ 0): committed 0 and a row of −1.
//   tokens:               [rows] the packed tokens the target verified
//   k, offsets:           [bucket], [bucket + 1] as written by Pack (dvl_pack.h)
//   accepted, next_token: [bucket] from VerifyGreedyPacked (greedy_accept.h)
//   committed:            [bucket];  out_tokens: [bucket, width], width ≥ W = max k_i
// Device pointers; queued on `stream` (graph-capturable).
void BuildVerifyOutputs(const int32_t* tokens, const int32_t* k, const int32_t* offsets,
                        const int32_t* accepted, const int32_t* next_token, int32_t bucket,
                        int32_t width, int32_t* committed, int32_t* out_tokens,
                        cudaStream_t stream);

}  // namespace dscale::cuda
