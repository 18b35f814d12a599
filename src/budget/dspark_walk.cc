#include "budget/dspark_walk.h"

#include <algorithm>

#include "core/check.h"

namespace dscale::budget {

void ConditionalConfidences(const float* q, int64_t n, int width, float* c) {
  for (int64_t r = 0; r < n; ++r) {
    for (int k = 1; k < width; ++k) {
      const float prev = q[r * width + k - 1];
      c[r * (width - 1) + k - 1] = prev > 0 ? q[r * width + k] / prev : 0.0f;
    }
  }
}

DSparkChoice DSparkWalk(const float* q, int64_t n, int width,
                        const std::function<double(int64_t)>& sps, DSparkScratch* scratch,
                        int32_t* k) {
  DSCALE_CHECK(n >= 1 && width >= 2);
  auto& candidates = scratch->candidates;
  candidates.clear();
  for (int64_t r = 0; r < n; ++r) {
    k[r] = 1;
    for (int32_t j = 1; j < width; ++j) {
      const float a = q[r * width + j];
      if (a > 0) candidates.push_back({a, j, static_cast<int32_t>(r)});
    }
  }
  std::sort(candidates.begin(), candidates.end(), [](const auto& x, const auto& y) {
    if (x.survival != y.survival) return x.survival > y.survival;
    if (x.position != y.position) return x.position < y.position;
    return x.request < y.request;
  });
  DSparkChoice choice{.rows = n, .tokens = static_cast<double>(n)};
  choice.throughput = choice.tokens * sps(n);
  for (const auto& c : candidates) {
    const double tokens = choice.tokens + c.survival;
    const double throughput = tokens * sps(choice.rows + 1);
    if (!(throughput > choice.throughput)) break;  // the early stop
    DSCALE_CHECK(k[c.request] == c.position);      // prefixes come in order
    k[c.request] = c.position + 1;
    choice = {.rows = choice.rows + 1, .tokens = tokens, .throughput = throughput};
  }
  return choice;
}

}  // namespace dscale::budget
