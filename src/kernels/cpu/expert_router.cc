#include "kernels/cpu/expert_router.h"

#include <cmath>
#include <vector>

#include "core/check.h"

namespace dscale::cpu {
namespace {

// p [experts] := softmax(logits) in f32.
void Softmax(const float* logits, int64_t experts, float* p) {
  float max = logits[0];
  for (int64_t e = 1; e < experts; ++e) max = std::fmax(max, logits[e]);
  float sum = 0.0f;
  for (int64_t e = 0; e < experts; ++e) {
    p[e] = std::exp(logits[e] - max);
    sum += p[e];
  }
  const float inv = 1.0f / sum;
  for (int64_t e = 0; e < experts; ++e) p[e] *= inv;
}

// The k largest of p by selection (k ≤ experts, both small): each pass takes the first maximum
// among the experts not yet taken, so a tie goes to the lower index. (Non-finite logits give NaN
// probabilities: the ids stay valid experts and the NaN reaches the row's output.)
void TopK(const float* p, int64_t experts, int64_t k, std::vector<char>& taken, int32_t* ids,
          float* weights) {
  taken.assign(static_cast<size_t>(experts), 0);
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = -1;
    for (int64_t e = 0; e < experts; ++e) {
      if (!taken[e] && (best < 0 || p[e] > p[best])) best = e;
    }
    taken[best] = 1;
    ids[j] = static_cast<int32_t>(best);
    weights[j] = p[best];
  }
}

}  // namespace

void RouteTopK(const float* logits, int64_t rows, int64_t experts, int64_t k, bool normalize,
               int32_t* ids, float* weights) {
  DSCALE_CHECK(k >= 1 && k <= experts);
  std::vector<float> p(static_cast<size_t>(experts));
  std::vector<char> taken;
  for (int64_t r = 0; r < rows; ++r) {
    Softmax(logits + r * experts, experts, p.data());
    TopK(p.data(), experts, k, taken, ids + r * k, weights + r * k);
    if (!normalize) continue;
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) sum += weights[r * k + j];
    for (int64_t j = 0; j < k; ++j) weights[r * k + j] /= sum;
  }
}

}  // namespace dscale::cpu
