#pragma once
// The elementwise half of a bias-free GRU cell (PyTorch's nn.GRU gate order r, z, n). The two
// matrix products come from the caller's GEMMs:
//   gates_x = x · W_ihᵀ  [rows, 3·hidden]     gates_h = h · W_hhᵀ  [rows, 3·hidden]
// and this kernel finishes the step in place:
//   r = σ(gx_r + gh_r)   z = σ(gx_z + gh_z)   n = tanh(gx_n + r ⊙ gh_n)
//   h ← (1 − z) ⊙ n + z ⊙ h

#include <cstdint>

namespace dscale::cpu {

// h [rows, hidden] is read and overwritten; gates_x and gates_h are [rows, 3·hidden].
void GruUpdate(const float* gates_x, const float* gates_h, float* h, int64_t rows, int64_t hidden);

}  // namespace dscale::cpu
