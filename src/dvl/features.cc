#include "dvl/features.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/check.h"
#include "dvl/deterministic_random.h"

namespace dscale::dvl {
namespace {

// Rows of the projection matrix handled per block: the block of P (≤ 64 KiB) stays in cache
// while all 15 positions use it, and per-block float sums are flushed into doubles so that
// long vocabularies do not lose precision.
constexpr int64_t kProjectionBlockRows = 512;

void FillNormal(std::vector<float>& m, int64_t rows, int64_t cols, uint64_t stream_seed) {
  DeterministicRandom rng(stream_seed);
  const double scale = 1.0 / std::sqrt(static_cast<double>(rows));
  m.resize(static_cast<size_t>(rows * cols));
  for (float& v : m) v = static_cast<float>(rng.NextNormal() * scale);
}

// The 16 largest values of x[0, n), descending, by insertion into a sorted window: O(n) with
// rare insertions, never a full sort.
std::array<float, kTopRanks> TopRanks(const float* x, int64_t n) {
  std::array<float, kTopRanks> top{};
  int count = 0;
  for (int64_t v = 0; v < n; ++v) {
    const float value = x[v];
    if (count == kTopRanks && !(value > top[kTopRanks - 1])) continue;
    int pos = count < kTopRanks ? count++ : kTopRanks - 1;
    while (pos > 0 && top[pos - 1] < value) {
      top[pos] = top[pos - 1];
      --pos;
    }
    top[pos] = value;
  }
  return top;
}

// out[j, :cols] = Σ_r (x[j, r] − centre[j]) · p[r, :cols] for `positions` rows x of length
// `rows`; p is [rows, Cols] row-major. Blocked over r so that each block of p is reused by
// every position while it is in cache.
template <int Cols>
void ProjectRows(const float* x, int64_t rows, const double* centre, const float* p, float* out,
                 int64_t out_stride) {
  std::array<std::array<double, Cols>, kDraftPositions> total{};
  for (int64_t r0 = 0; r0 < rows; r0 += kProjectionBlockRows) {
    const int64_t r1 = std::min(rows, r0 + kProjectionBlockRows);
    for (int j = 0; j < kDraftPositions; ++j) {
      const float* row = x + j * rows;
      const float c = static_cast<float>(centre[j]);
      std::array<float, Cols> acc{};
      for (int64_t r = r0; r < r1; ++r) {
        const float value = row[r] - c;
        const float* pr = p + r * Cols;
        for (int k = 0; k < Cols; ++k) acc[k] += value * pr[k];
      }
      for (int k = 0; k < Cols; ++k) total[j][k] += acc[k];
    }
  }
  for (int j = 0; j < kDraftPositions; ++j) {
    for (int k = 0; k < Cols; ++k) out[j * out_stride + k] = static_cast<float>(total[j][k]);
  }
}

// Mean of x[0, n): eight independent float lanes (so the loop vectorises without reassociating
// one long dependency chain), combined in double.
double Mean(const float* x, int64_t n) {
  constexpr int kLanes = 8;
  std::array<float, kLanes> lanes{};
  int64_t v = 0;
  for (; v + kLanes <= n; v += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += x[v + l];
  }
  double sum = 0.0;
  for (; v < n; ++v) sum += x[v];
  for (float lane : lanes) sum += lane;
  return sum / static_cast<double>(n);
}

void BatchContext(int64_t live_count, float* out25) {
  std::fill(out25, out25 + kBatchContextDim, 0.0f);
  out25[kContextLiveCount] = static_cast<float>(live_count);
  out25[kContextInitialState] = 1.0f;
}

}  // namespace

Projections MakeProjections(int64_t hidden_size, int64_t vocab_size, uint64_t seed) {
  DSCALE_CHECK(hidden_size > 0 && vocab_size >= kTopRanks);
  Projections p;
  p.hidden_size = hidden_size;
  p.vocab_size = vocab_size;
  p.seed = seed;
  FillNormal(p.hidden, hidden_size, kHiddenProjDim, SplitMix64Mix(seed));
  FillNormal(p.logit, vocab_size, kLogitProjDim, SplitMix64Mix(seed ^ 1));
  return p;
}

void ConfidenceFeatures(const float* logits, int64_t vocab, float* out18) {
  DSCALE_CHECK(vocab >= kTopRanks);
  const std::array<float, kTopRanks> top = TopRanks(logits, vocab);
  const float max_logit = top[0];
  // Softmax statistics relative to the maximum: z = Σ e^(x−max), s = Σ e^(x−max)·(x−max);
  // log p_top = −log z and entropy = log z − s / z.
  double z = 0.0;
  double s = 0.0;
  for (int64_t v = 0; v < vocab; ++v) {
    const float shifted = logits[v] - max_logit;
    const float e = std::exp(shifted);
    z += e;
    s += static_cast<double>(e) * shifted;
  }
  const double log_z = std::log(z);
  out18[0] = max_logit;
  for (int r = 1; r < kTopRanks; ++r) out18[r] = max_logit - top[r];
  out18[kTopRanks] = static_cast<float>(-log_z);
  out18[kTopRanks + 1] = static_cast<float>(log_z - s / z);
}

void ExtractFeatures(const float* logits, const float* hidden, int64_t live_count,
                     const Projections& proj, float* out) {
  const int64_t vocab = proj.vocab_size;
  const int64_t hidden_size = proj.hidden_size;
  DSCALE_CHECK(vocab >= kTopRanks && hidden_size > 0);
  DSCALE_CHECK(static_cast<int64_t>(proj.logit.size()) == vocab * kLogitProjDim);
  DSCALE_CHECK(static_cast<int64_t>(proj.hidden.size()) == hidden_size * kHiddenProjDim);

  std::array<double, kDraftPositions> logit_mean{};
  for (int j = 0; j < kDraftPositions; ++j) {
    const float* row = logits + j * vocab;
    ConfidenceFeatures(row, vocab, out + kConfidenceOffset + j * kConfidencePerPosition);
    logit_mean[j] = Mean(row, vocab);
  }
  const std::array<double, kDraftPositions> no_centre{};
  ProjectRows<kHiddenProjDim>(hidden, hidden_size, no_centre.data(), proj.hidden.data(),
                              out + kHiddenProjOffset, kHiddenProjDim);
  ProjectRows<kLogitProjDim>(logits, vocab, logit_mean.data(), proj.logit.data(),
                             out + kLogitProjOffset, kLogitProjDim);
  BatchContext(live_count, out + kBatchContextOffset);
}

void ExtractFeaturesBatch(const float* logits, const float* hidden, int64_t n, int64_t live_count,
                          const Projections& proj, float* out) {
  const int64_t logit_stride = kDraftPositions * proj.vocab_size;
  const int64_t hidden_stride = kDraftPositions * proj.hidden_size;
  for (int64_t i = 0; i < n; ++i) {
    ExtractFeatures(logits + i * logit_stride, hidden + i * hidden_stride, live_count, proj,
                    out + i * kFeatureCount);
  }
}

}  // namespace dscale::dvl
