#pragma once
// A mixture-of-experts router's choice per row (transformers' Qwen3MoeSparseMoeBlock): softmax
// over the experts' logits, the k most probable experts, and their probabilities as the weights,
// renormalised to sum 1 when asked.

#include <cstdint>

namespace dscale::cpu {

// For each row r of logits [rows, experts] (f32): p = softmax(logits[r]) in f32 (max subtracted,
// exponentials summed in expert order), then ids[r, 0..k) = the k largest p in descending order,
// an exact tie going to the lower expert index, and weights[r, j] = p[ids[r, j]], divided by
// Σ_j p[ids[r, j]] (summed in that order) when `normalize`. ids, weights: [rows, k];
// 1 ≤ k ≤ experts. `logits` is overwritten (the probabilities, the chosen ones marked), so the
// call needs no memory of its own. A row's result depends on that row alone.
void RouteTopK(float* logits, int64_t rows, int64_t experts, int64_t k, bool normalize,
               int32_t* ids, float* weights);

}  // namespace dscale::cpu
