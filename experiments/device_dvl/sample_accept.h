#pragma once
// Sampled prefix verification on the device, over packed ragged rows: the contract of
// VerifySampled (spec/prefix_verifier.h) for every request of a bucket at once, with the
// uniforms drawn beforehand by the host (spec/uniform_lookahead.h peeks them from the request's
// stream and consumes the `uniforms_used` this reports, so the stream stays the CPU's).
//
// Request i owns packed rows offsets[i] .. offsets[i] + k_i − 1: row 0 holds the anchor, row j
// the draft d_j, and row j's logits give P_j, the distribution of the token after it (softmax
// of logits / T_i, then top-k, then the top-p nucleus within the top-k set, renormalised —
// TargetDistribution in spec/sampling.h). In the CPU's order, uniform u_0, u_1, .. of row i of
// `uniforms`: for j = 0 .. k_i − 2, u < P_j(d_{j+1}) accepts d_{j+1}; at the first rejection the
// next token is the inverse-CDF draw (next uniform) from P_j with d_{j+1} removed and the rest
// divided by 1 − P_j(d_{j+1}); when every draft passes it is the draw from P_{k_i−1}. A request
// therefore uses k_i uniforms when all drafts pass and j + 2 when d_{j+1} is rejected: at most
// k_i ≤ W (kUniformsPerRequest).
//
// Requests with temperature ≤ 0 are greedy (VerifyGreedy: accept while d_{j+1} is row j's
// argmax, ties to the lowest id) and use no uniforms, so one bucket may mix both kinds.
//
// Arithmetic follows the CPU's: probabilities in double, formed by the same expressions
// (exp((l − max) / T) divided by the softmax sum, then by the kept mass when filtered, then by
// 1 − P(x) after a rejection). Sums run in a different order (block reductions), so results are
// the CPU's except where a uniform lies within rounding (~1e-15 relative) of an acceptance
// threshold or a CDF step, or the nucleus mass within rounding of top_p.
//
// Determinism: no atomics; every reduction has a fixed shape, so a replay gives the same bits.
// Graph-capturable: launch sizes depend only on (bucket, rows, vocab), and the scratch is a
// caller-owned workspace at a fixed address (no allocation at run time).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/dvl_shapes.h"

namespace dscale::cuda {

// Width of each request's row of pre-drawn uniforms: the most one verification uses (k ≤ W).
inline constexpr int kUniformsPerRequest = dvl::kBlockWidth;

// Device inputs of one bucket's verification. Per-request arrays are [bucket].
struct SampleAcceptInputs {
  const float* logits = nullptr;       // [rows, vocab] the target's logits at each packed row
  const int32_t* tokens = nullptr;     // [rows] the packed tokens the target verified
  const int32_t* k = nullptr;          // [bucket] as written by Pack (dvl_pack.h); 0: sentinel
  const int32_t* offsets = nullptr;    // [bucket + 1]; offsets[bucket] ≤ rows
  const float* temperature = nullptr;  // ≤ 0: greedy
  const int32_t* top_k = nullptr;      // 0 or ≥ vocab: no top-k filter
  const float* top_p = nullptr;        // ≥ 1: no nucleus filter
  const double* uniforms = nullptr;    // [bucket, kUniformsPerRequest], each in [0, 1)
};

// Device outputs, [bucket] each. Sentinels (k ≤ 0) get accepted 0, next token −1, used 0.
struct SampleAcceptOutputs {
  int32_t* accepted = nullptr;       // drafts accepted, 0 .. k_i − 1
  int32_t* next_token = nullptr;     // the token after the accepted prefix
  int32_t* uniforms_used = nullptr;  // how many of the request's uniforms were consumed
};

// Bytes of scratch VerifySampledPacked needs for `rows` packed rows of `vocab` logits; most of
// it is the rank order of the filtered rows (16 bytes per logit: 64-bit order keys, double-
// buffered by the sort). Queries the current device (the sort's tuning depends on it).
size_t SampleAcceptWorkspaceBytes(int64_t rows, int64_t vocab);

// Verifies every request of the bucket. `workspace` is device memory of at least
// SampleAcceptWorkspaceBytes(rows, vocab) bytes, 256-byte aligned (cudaMalloc's), owned by the
// caller; its contents need no initialisation. Queued on `stream` (graph-capturable).
// Contract: 1 ≤ vocab, rows · vocab < 2^31, k_i ≤ kUniformsPerRequest (a larger k traps), drafts
// are token ids in [0, vocab) (one outside is never accepted).
void VerifySampledPacked(const SampleAcceptInputs& in, int32_t bucket, int64_t rows, int64_t vocab,
                         void* workspace, size_t workspace_bytes, const SampleAcceptOutputs& out,
                         cudaStream_t stream);

}  // namespace dscale::cuda
