#include "dvl/features.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "dvl/deterministic_random.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/softmax.h"

namespace dscale::dvl {
namespace {

// Feature rows (request, position) whose confidence values are computed on several threads,
// once the batch holds at least this many logits.
constexpr int64_t kParallelMinLogits = int64_t{1} << 16;

void FillNormal(std::vector<float>& m, int64_t rows, int64_t cols, uint64_t stream_seed) {
  DeterministicRandom rng(stream_seed);
  const double scale = 1.0 / std::sqrt(static_cast<double>(rows));
  m.resize(static_cast<size_t>(rows * cols));
  for (float& v : m) v = static_cast<float>(rng.NextNormal() * scale);
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

// The confidence block of every (request, position) row of logits [rows, V] into out
// [rows / 15, 1735], and each row's mean into mean[rows] unless `mean` is null. Rows run on the
// OpenMP threads for large batches (each writes only its own slots).
void ConfidenceRows(const float* logits, int64_t rows, int64_t vocab, double* mean, float* out) {
#pragma omp parallel for schedule(static) if (rows * vocab >= kParallelMinLogits)
  for (int64_t row = 0; row < rows; ++row) {
    const float* x = logits + row * vocab;
    float* request_out = out + (row / kDraftPositions) * kFeatureCount;
    const int64_t j = row % kDraftPositions;
    ConfidenceFeatures(x, vocab, request_out + kConfidenceOffset + j * kConfidencePerPosition);
    if (mean != nullptr) mean[row] = Mean(x, vocab);
  }
}

// The logit block of every row, out as in ConfidenceRows: (x − m·1)·P = x·P − m·(1ᵀP), one
// product over the batch's logits [rows, V] centred afterwards with the column sums 1ᵀP in
// double, or h·F over its hidden rows [rows, H] where the projection is folded through the head.
void LogitProjectionRows(const float* logits, const float* hidden, int64_t rows,
                         const double* logit_mean, const Projections& proj, float* out) {
  thread_local std::vector<float> logit_proj;
  logit_proj.resize(rows * kLogitProjDim);
  const bool folded = !proj.head_logit.empty();
  if (folded) {
    cpu::MatMul(hidden, proj.head_logit.data(), logit_proj.data(), rows, proj.hidden_size,
                kLogitProjDim);
  } else {
    cpu::MatMul(logits, proj.logit.data(), logit_proj.data(), rows, proj.vocab_size, kLogitProjDim);
  }
  const std::vector<double>& column_sum = proj.logit_column_sum;
  for (int64_t row = 0; row < rows; ++row) {
    float* centred = out + (row / kDraftPositions) * kFeatureCount + kLogitProjOffset +
                     (row % kDraftPositions) * kLogitProjDim;
    const float* projected = logit_proj.data() + row * kLogitProjDim;
    if (folded) {
      std::copy_n(projected, kLogitProjDim, centred);
      continue;
    }
    for (int k = 0; k < kLogitProjDim; ++k) {
      centred[k] = static_cast<float>(projected[k] - logit_mean[row] * column_sum[k]);
    }
  }
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
  SetLogitColumnSums(p);
  return p;
}

void SetLogitColumnSums(Projections& p) {
  p.logit_column_sum.assign(kLogitProjDim, 0.0);
  const int64_t rows = static_cast<int64_t>(p.logit.size()) / kLogitProjDim;
  for (int64_t r = 0; r < rows; ++r) {
    for (int k = 0; k < kLogitProjDim; ++k) p.logit_column_sum[k] += p.logit[r * kLogitProjDim + k];
  }
}

void FoldLogitProjection(Projections& p, const HeadRows& head_rows) {
  const int64_t vocab = p.vocab_size, hidden = p.hidden_size;
  DSCALE_CHECK(static_cast<int64_t>(p.logit.size()) == vocab * kLogitProjDim);
  DSCALE_CHECK(p.logit_column_sum.size() == kLogitProjDim);
  // Rows of W a block: [1024, H] f32 (8 MiB at H = 2,048) beside the product [32, H].
  constexpr int64_t kBlockRows = 1024;
  std::vector<float> w(static_cast<size_t>(std::min(vocab, kBlockRows) * hidden));
  std::vector<float> centred(static_cast<size_t>(std::min(vocab, kBlockRows) * kLogitProjDim));
  std::vector<float> product(static_cast<size_t>(hidden * kLogitProjDim));
  std::vector<double> folded(product.size(), 0.0);
  for (int64_t first = 0; first < vocab; first += kBlockRows) {
    const int64_t count = std::min(kBlockRows, vocab - first);
    head_rows(first, count, w.data());
    for (int64_t r = 0; r < count; ++r) {
      for (int k = 0; k < kLogitProjDim; ++k) {
        centred[r * kLogitProjDim + k] =
            static_cast<float>(p.logit[(first + r) * kLogitProjDim + k] -
                               p.logit_column_sum[k] / static_cast<double>(vocab));
      }
    }
    // [32, H] = P̃ᵀ·W, added into F [H, 32] transposed.
    cpu::MatMulTransposedA(centred.data(), w.data(), product.data(), count, kLogitProjDim, hidden);
    for (int64_t i = 0; i < hidden; ++i) {
      for (int k = 0; k < kLogitProjDim; ++k)
        folded[i * kLogitProjDim + k] += product[k * hidden + i];
    }
  }
  p.head_logit.assign(folded.begin(), folded.end());
}

void ConfidenceFeatures(const float* logits, int64_t vocab, float* out18) {
  DSCALE_CHECK(vocab >= kTopRanks);
  std::array<float, kTopRanks> top;
  cpu::LargestValues(logits, vocab, kTopRanks, top.data());
  const float max_logit = top[0];
  // Softmax statistics relative to the maximum: z = Σ e^(x−max), s = Σ e^(x−max)·(x−max);
  // log p_top = −log z and entropy = log z − s / z.
  const cpu::ExpMoments moments = cpu::ShiftedExpMoments(logits, vocab, max_logit);
  const double z = moments.sum;
  const double s = moments.weighted;
  const double log_z = std::log(z);
  out18[0] = max_logit;
  for (int r = 1; r < kTopRanks; ++r) out18[r] = max_logit - top[r];
  out18[kTopRanks] = static_cast<float>(-log_z);
  out18[kTopRanks + 1] = static_cast<float>(log_z - s / z);
}

void ExtractFeatures(const float* logits, const float* hidden, int64_t live_count,
                     const Projections& proj, float* out) {
  ExtractFeaturesBatch(logits, hidden, 1, live_count, proj, out);
}

void ExtractFeaturesBatch(const float* logits, const float* hidden, int64_t n, int64_t live_count,
                          const Projections& proj, float* out) {
  const int64_t vocab = proj.vocab_size;
  const int64_t hidden_size = proj.hidden_size;
  DSCALE_CHECK(vocab >= kTopRanks && hidden_size > 0 && n >= 0);
  DSCALE_CHECK(static_cast<int64_t>(proj.logit.size()) == vocab * kLogitProjDim);
  DSCALE_CHECK(static_cast<int64_t>(proj.hidden.size()) == hidden_size * kHiddenProjDim);
  DSCALE_CHECK_MSG(proj.logit_column_sum.size() == kLogitProjDim,
                   "Projections without column sums: call SetLogitColumnSums after setting logit");
  const bool folded = !proj.head_logit.empty();
  DSCALE_CHECK(!folded ||
               static_cast<int64_t>(proj.head_logit.size()) == hidden_size * kLogitProjDim);
  const int64_t rows = n * kDraftPositions;  // one per (request, draft position)
  if (rows == 0) return;

  // Reused across calls on this thread, so a serving loop allocates only while batches grow.
  thread_local std::vector<double> logit_mean;
  thread_local std::vector<float> hidden_proj;
  logit_mean.resize(folded ? 0 : rows);
  hidden_proj.resize(rows * kHiddenProjDim);

  ConfidenceRows(logits, rows, vocab, folded ? nullptr : logit_mean.data(), out);
  // Each projection as one product over all rows of the batch.
  cpu::MatMul(hidden, proj.hidden.data(), hidden_proj.data(), rows, hidden_size, kHiddenProjDim);
  for (int64_t row = 0; row < rows; ++row) {
    std::copy_n(hidden_proj.data() + row * kHiddenProjDim, kHiddenProjDim,
                out + (row / kDraftPositions) * kFeatureCount + kHiddenProjOffset +
                    (row % kDraftPositions) * kHiddenProjDim);
  }
  LogitProjectionRows(logits, hidden, rows, logit_mean.data(), proj, out);
  for (int64_t i = 0; i < n; ++i) {
    BatchContext(live_count, out + i * kFeatureCount + kBatchContextOffset);
  }
}

}  // namespace dscale::dvl
