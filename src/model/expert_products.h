#pragma once
// The experts' half of a sparse MLP layer on the CPU (CpuOps::ExpertProducts, for the template in
// decoder_layer.h): given each row's routed experts and weights, x += Σ_j weight_j · expert(x̂)
// where expert(x̂) = down(silu(gate(x̂)) ⊙ up(x̂)).
//
// The rows are grouped by expert, so each expert routed to in the step reads its weights once,
// for all its rows together. Lossless speculation needs a row's bits to be independent of which
// other rows are in the step and which experts they share: each product runs on the
// row-invariant kernels (WeightMatrix's Project: every row count runs the same register tiles,
// kernels/cpu/row_blocks.h), SwiGLU is elementwise, and a row's k expert outputs are added in
// its own top-k rank order, whatever the grouping.

#include <cstdint>
#include <vector>

#include "model/decoder_weights.h"
#include "model/weight_matrix.h"

namespace dscale {

// Buffers grown on demand and reused across calls.
struct ExpertScratch {
  std::vector<int32_t> starts;  // [experts + 1]: expert e's entries are [starts[e], starts[e+1])
  std::vector<int32_t> order;   // [rows·k]: entries r·k + j grouped by expert, rows ascending
  std::vector<int32_t> entry;   // [rows·k]: where entry r·k + j lies in `order`
  std::vector<int32_t> next;    // [experts]: the counting sort's cursors
  std::vector<int32_t> routed;  // the experts with rows this call, ascending
  std::vector<float> in;        // [rows·k, hidden]: the rows each expert reads, grouped
  std::vector<float> gate_up;   // [rows·k, 2·expert_intermediate]
  std::vector<float> act;       // [rows·k, expert_intermediate]
  std::vector<float> out;       // [rows·k, hidden]: the experts' outputs, grouped
  // The shared expert's (Qwen3.5-MoE), by row.
  std::vector<float> shared_gate_up;  // [rows, 2·shared_intermediate]
  std::vector<float> shared_act;      // [rows, shared_intermediate]
  std::vector<float> shared_out;      // [rows, hidden]
  std::vector<float> shared_logit;    // [rows]: shared_expert_gate · normed row
};

struct ExpertRoutes {
  const int32_t* ids = nullptr;    // [rows, k], each in [0, experts)
  const float* weights = nullptr;  // [rows, k]
  int32_t k = 0;
};

// x[rows, hidden] += Σ_{j<k} routes.weights[r, j] · expert_{routes.ids[r, j]}(normed[r]) for
// every row r, the k terms summed in j order, plus (with a shared expert) sigmoid(shared_gate ·
// normed[r]) · shared(normed[r]), before the one add to x. normed: [rows, hidden];
// moe.experts[e]: gate_up [2·I, hidden], down [hidden, I]. Products take their activations as
// `activations` says. Returns the distinct routed experts run (each read its weights once).
int32_t ExpertProducts(const float* normed, const SparseMlpWeights& moe, int64_t hidden,
                       int32_t rows, const ExpertRoutes& routes, ActivationModes activations,
                       ExpertScratch& s, float* x);

}  // namespace dscale
