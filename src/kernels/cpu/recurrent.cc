#include "kernels/cpu/recurrent.h"

#include <cmath>

namespace dscale::cpu {
namespace {

// σ(v) without overflow for any finite v: built from e^−|v| ∈ (0, 1].
float Sigmoid(float v) {
  const float e = std::exp(-std::fabs(v));
  return v >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

}  // namespace

void GruUpdate(const float* gates_x, const float* gates_h, float* h, int64_t rows, int64_t hidden) {
  // A head's GRU is a few hundred units wide for a few dozen requests: scalar code costs
  // microseconds next to the GEMMs that produce the gates.
  for (int64_t row = 0; row < rows; ++row) {
    const float* gx = gates_x + row * 3 * hidden;
    const float* gh = gates_h + row * 3 * hidden;
    float* state = h + row * hidden;
    for (int64_t i = 0; i < hidden; ++i) {
      const float r = Sigmoid(gx[i] + gh[i]);
      const float z = Sigmoid(gx[hidden + i] + gh[hidden + i]);
      const float n = std::tanh(gx[2 * hidden + i] + r * gh[2 * hidden + i]);
      state[i] = (1.0f - z) * n + z * state[i];
    }
  }
}

}  // namespace dscale::cpu
