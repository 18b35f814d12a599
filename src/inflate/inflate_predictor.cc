// Predictor inflation. The logit features are (x − mean(x))·P = x·P − mean(x)·(1ᵀP) with the
// mean over the whole vocabulary. With P' = P − 1·(1ᵀP)/V on the real rows and 0 on the pad rows,
// x'·P' equals the small features for any pad logits, and 1ᵀP' = 0; the grid below makes that sum
// exactly 0 in floating point too, so mean(x')·(1ᵀP'), whose mean is dominated by pad logits of
// order 10⁶ and more, contributes exactly nothing.

#include "inflate/inflate_predictor.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/dvl_shapes.h"

namespace dscale {
namespace {

// Column k of the [V, 32] logit projection, centred, on the grid q = 2^(e−24) where every value
// lies in (−2^(e−1), 2^(e−1)): each value is then an exact float, every partial sum of up to 2^28
// of them an exact double, and one grid step on a few values makes the column sum exactly zero.
std::vector<float> CentredColumn(const std::vector<float>& logit, int64_t vocab, int k) {
  std::vector<double> u(static_cast<size_t>(vocab));
  double sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v) sum += logit[v * dvl::kLogitProjDim + k];
  double largest = 0.0;
  for (int64_t v = 0; v < vocab; ++v) {
    u[v] = logit[v * dvl::kLogitProjDim + k] - sum / static_cast<double>(vocab);
    largest = std::max(largest, std::fabs(u[v]));
  }
  const int e = largest > 0.0 ? std::ilogb(largest) + 2 : 0;  // largest < 2^(e−1)
  const double q = std::ldexp(1.0, e - 24);
  std::vector<double> w(u.size());
  double total = 0.0;
  for (size_t v = 0; v < u.size(); ++v) {
    w[v] = q * std::nearbyint(u[v] / q);
    total += w[v];
  }
  // Move the values rounded furthest towards the excess back by one step each.
  auto steps = static_cast<int64_t>(std::llround(total / q));
  std::vector<size_t> order(u.size());
  std::iota(order.begin(), order.end(), size_t{0});
  const double sign = steps > 0 ? 1.0 : -1.0;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return sign * (w[a] - u[a]) > sign * (w[b] - u[b]); });
  for (int64_t i = 0; i < std::abs(steps); ++i)
    w[order[static_cast<size_t>(i) % order.size()]] -= sign * q;
  return std::vector<float>(w.begin(), w.end());
}

}  // namespace

Result<dvl::Predictor> InflatePredictor(const dvl::Predictor& small, const InflatePlan& plan) {
  return InflatePredictor(small, plan, plan.small_target.vocab_size, plan.large_target.vocab_size);
}

// The real columns are the first `vocab` in both (the plan's vocabulary map is a prefix, and an
// inflated draft subset lists the source subset's ids before its pad ids).
Result<dvl::Predictor> InflatePredictor(const dvl::Predictor& small, const InflatePlan& plan,
                                        int64_t vocab, int64_t large_vocab) {
  const dvl::Projections& p = small.projections();
  const int64_t d = plan.small_target.hidden_size;
  if (p.hidden_size != d || p.vocab_size != vocab) {
    return InvalidArgument("predictor: built for drafter hidden size " +
                           std::to_string(p.hidden_size) + " and vocabulary " +
                           std::to_string(p.vocab_size) + ", but the source pair has " +
                           std::to_string(d) + " and " + std::to_string(vocab));
  }
  dvl::Projections large;
  large.hidden_size = plan.large_target.hidden_size;
  large.vocab_size = large_vocab;
  large.seed = p.seed;
  // The drafter's final rows come out as y / λ when the LM head is the λ-scaled embedding.
  const float hidden_scale = plan.final_row_scale();
  large.hidden.assign(static_cast<size_t>(large.hidden_size) * dvl::kHiddenProjDim, 0.0f);
  for (int64_t i = 0; i < large.hidden_size; ++i) {
    const int64_t source = plan.hidden[static_cast<size_t>(i)];
    if (source < 0) continue;
    for (int k = 0; k < dvl::kHiddenProjDim; ++k) {
      large.hidden[i * dvl::kHiddenProjDim + k] =
          hidden_scale * p.hidden[source * dvl::kHiddenProjDim + k];
    }
  }
  large.logit.assign(static_cast<size_t>(large.vocab_size) * dvl::kLogitProjDim, 0.0f);
  for (int k = 0; k < dvl::kLogitProjDim; ++k) {
    const std::vector<float> column = CentredColumn(p.logit, vocab, k);
    for (int64_t v = 0; v < vocab; ++v) large.logit[v * dvl::kLogitProjDim + k] = column[v];
  }
  dvl::SetLogitColumnSums(large);
  return dvl::Predictor(std::move(large), small.weights());
}

}  // namespace dscale
