#include "kernels/cpu/expert_router.h"

#include <cmath>
#include <limits>

#include "core/check.h"

namespace dscale::cpu {
namespace {

// x [experts] := softmax(x) in f32.
void Softmax(float* x, int64_t experts) {
  float max = x[0];
  for (int64_t e = 1; e < experts; ++e) max = std::fmax(max, x[e]);
  float sum = 0.0f;
  for (int64_t e = 0; e < experts; ++e) {
    x[e] = std::exp(x[e] - max);
    sum += x[e];
  }
  const float inv = 1.0f / sum;
  for (int64_t e = 0; e < experts; ++e) x[e] *= inv;
}

// The k largest of p by selection (k ≤ experts, both small): each pass takes the first maximum
// among the experts not yet taken (marked −∞, below every probability), so a tie goes to the
// lower index. (Non-finite logits give NaN probabilities: the ids stay valid experts and the NaN
// reaches the row's output.)
void TopK(float* p, int64_t experts, int64_t k, int32_t* ids, float* weights) {
  constexpr float kTaken = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = 0;
    for (int64_t e = 1; e < experts; ++e) {
      if (p[e] > p[best] || (p[best] == kTaken && p[e] != kTaken)) best = e;
    }
    ids[j] = static_cast<int32_t>(best);
    weights[j] = p[best];
    p[best] = kTaken;
  }
}

}  // namespace

void RouteTopK(float* logits, int64_t rows, int64_t experts, int64_t k, bool normalize,
               int32_t* ids, float* weights) {
  DSCALE_CHECK(k >= 1 && k <= experts);
  for (int64_t r = 0; r < rows; ++r) {
    float* p = logits + r * experts;
    Softmax(p, experts);
    TopK(p, experts, k, ids + r * k, weights + r * k);
    if (!normalize) continue;
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) sum += weights[r * k + j];
    for (int64_t j = 0; j < k; ++j) weights[r * k + j] /= sum;
  }
}

}  // namespace dscale::cpu
