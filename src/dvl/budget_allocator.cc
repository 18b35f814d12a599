#include "dvl/budget_allocator.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace dscale::dvl {
namespace {

float Sigmoid(float x) {
  if (std::isnan(x)) return 0.0f;
  return 1.0f / (1.0f + std::exp(-x));
}

// Cumulative minimum of one row: q[0] = 1, q[j] = min(q[j − 1], p[j − 1]).
template <typename ToProbability>
void PrefixRow(const float* in, int width, float* q, ToProbability to_probability) {
  q[0] = 1.0f;
  for (int j = 1; j < width; ++j) q[j] = std::min(q[j - 1], to_probability(in[j - 1]));
}

// argmax over requests with k_i < width of q_{i,k_i}; lowest index on ties.
int64_t BestGrow(const float* q, int64_t n, int width, const int32_t* k) {
  int64_t best = -1;
  float best_gain = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (k[i] >= width) continue;
    const float gain = q[i * width + k[i]];
    if (best < 0 || gain > best_gain) {
      best = i;
      best_gain = gain;
    }
  }
  return best;
}

// argmin over requests with k_i > 1 of q_{i,k_i−1}; lowest index on ties.
int64_t BestShrink(const float* q, int64_t n, int width, const int32_t* k) {
  int64_t best = -1;
  float best_loss = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (k[i] <= 1) continue;
    const float loss = q[i * width + k[i] - 1];
    if (best < 0 || loss < best_loss) {
      best = i;
      best_loss = loss;
    }
  }
  return best;
}

// Up to this many requests the updates scan all requests (O(N) each, no allocation: the
// engine's batches); beyond, a heap keeps them O(log N) each, so a whole allocation is
// O(N + |Δ| log N) however many requests there are.
constexpr int64_t kScanMaxRequests = 256;

// A request's next-slot gain (growing) or last-slot loss (shrinking).
struct Candidate {
  float score;
  int64_t i;
};

// Applies the |delta| updates with a heap ordered exactly as BestGrow / BestShrink choose:
// largest gain (smallest loss) first, the lowest index among equals. Each update changes only
// its request's score, which is pushed again while that request can still change.
void UpdateWithHeap(const float* q, int64_t n, int width, int64_t delta, int32_t* k) {
  const bool grow = delta > 0;
  const auto before = [grow](const Candidate& a, const Candidate& b) {
    if (a.score != b.score) return grow ? a.score > b.score : a.score < b.score;
    return a.i < b.i;
  };
  // std::push_heap keeps the element for which `less` is never true on top: invert.
  const auto less = [&before](const Candidate& a, const Candidate& b) { return before(b, a); };
  const auto score = [&](int64_t i) {
    return grow ? q[i * width + k[i]] : q[i * width + k[i] - 1];
  };
  const auto can_change = [&](int64_t i) { return grow ? k[i] < width : k[i] > 1; };
  std::vector<Candidate> heap;
  heap.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (can_change(i)) heap.push_back({score(i), i});
  }
  std::make_heap(heap.begin(), heap.end(), less);
  for (int64_t left = grow ? delta : -delta; left > 0; --left) {
    std::pop_heap(heap.begin(), heap.end(), less);
    const int64_t i = heap.back().i;
    heap.pop_back();
    k[i] += grow ? 1 : -1;
    if (can_change(i)) {
      heap.push_back({score(i), i});
      std::push_heap(heap.begin(), heap.end(), less);
    }
  }
}

}  // namespace

Result<int64_t> BudgetFromFraction(int64_t n, int width, double fraction) {
  if (n < 1) return InvalidArgument("live request count must be >= 1, got " + std::to_string(n));
  if (width < 1) return InvalidArgument("block width must be >= 1, got " + std::to_string(width));
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    return InvalidArgument("verify budget fraction must be in (0, 1], got " +
                           std::to_string(fraction));
  }
  const int64_t full = static_cast<int64_t>(width) * n;
  const int64_t rounded = std::llround(fraction * static_cast<double>(full));
  return std::clamp(rounded, n, full);
}

Status CheckBudget(int64_t n, int width, int64_t budget) {
  if (n < 1) return InvalidArgument("live request count must be >= 1, got " + std::to_string(n));
  const int64_t full = static_cast<int64_t>(width) * n;
  if (budget < n || budget > full) {
    return InvalidArgument("verify budget " + std::to_string(budget) + " is outside [N, W·N] = [" +
                           std::to_string(n) + ", " + std::to_string(full) + "]");
  }
  return Status::Ok();
}

void PrefixScoresFromLogits(const float* logits, int64_t n, int width, float* q) {
  for (int64_t i = 0; i < n; ++i) {
    PrefixRow(logits + i * (width - 1), width, q + i * width, Sigmoid);
  }
}

void PrefixScoresFromProbs(const float* probs, int64_t n, int width, float* q) {
  for (int64_t i = 0; i < n; ++i) {
    PrefixRow(probs + i * (width - 1), width, q + i * width, [](float p) { return p; });
  }
}

int32_t SeedLength(const float* q, int width) {
  double expected = 0.0;
  for (int j = 1; j < width; ++j) expected += q[j];
  const double rounded = std::floor(expected + 0.5);
  return static_cast<int32_t>(std::clamp(rounded, 1.0, static_cast<double>(width)));
}

int64_t AllocateInto(const float* q, int64_t n, int width, int64_t budget, int32_t* seed,
                     int32_t* k, int32_t* offsets) {
  DSCALE_CHECK(CheckBudget(n, width, budget).ok());
  int64_t delta = budget;
  for (int64_t i = 0; i < n; ++i) {
    seed[i] = SeedLength(q + i * width, width);
    k[i] = seed[i];
    delta -= k[i];
  }
  const int64_t updates = delta < 0 ? -delta : delta;
  // Σk ≤ W·N and Σk ≥ N whenever Δ ≠ 0 in the matching direction, so a candidate exists.
  if (n > kScanMaxRequests && delta != 0) {
    UpdateWithHeap(q, n, width, delta, k);
  } else {
    for (; delta > 0; --delta) ++k[BestGrow(q, n, width, k)];
    for (; delta < 0; ++delta) --k[BestShrink(q, n, width, k)];
  }
  offsets[0] = 0;
  for (int64_t i = 0; i < n; ++i) offsets[i + 1] = offsets[i] + k[i];
  return updates;
}

Result<Allocation> Allocate(const float* q, int64_t n, int width, int64_t budget) {
  if (width < 2) return InvalidArgument("block width must be >= 2, got " + std::to_string(width));
  DSCALE_RETURN_IF_ERROR(CheckBudget(n, width, budget));
  Allocation a;
  a.budget = budget;
  a.seed.resize(static_cast<size_t>(n));
  a.k.resize(static_cast<size_t>(n));
  a.offsets.resize(static_cast<size_t>(n) + 1);
  a.updates = AllocateInto(q, n, width, budget, a.seed.data(), a.k.data(), a.offsets.data());
  return a;
}

Result<Allocation> AllocateFromLogits(const float* logits, int64_t n, int64_t budget) {
  if (n < 1) return InvalidArgument("live request count must be >= 1, got " + std::to_string(n));
  std::vector<float> q(static_cast<size_t>(n) * kBlockWidth);
  PrefixScoresFromLogits(logits, n, kBlockWidth, q.data());
  return Allocate(q.data(), n, kBlockWidth, budget);
}

Result<Allocation> AllocateFromProbs(const float* probs, int64_t n, int64_t budget) {
  if (n < 1) return InvalidArgument("live request count must be >= 1, got " + std::to_string(n));
  std::vector<float> q(static_cast<size_t>(n) * kBlockWidth);
  PrefixScoresFromProbs(probs, n, kBlockWidth, q.data());
  return Allocate(q.data(), n, kBlockWidth, budget);
}

}  // namespace dscale::dvl
