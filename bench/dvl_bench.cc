// DVL decision costs on the CPU: feature extraction at Qwen3-8B drafter sizes, predictor
// forward, budget allocation and flat-pack for one step of N requests.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <vector>

#include "dvl/budget_allocator.h"
#include "dvl/features.h"
#include "dvl/flat_pack.h"
#include "dvl/predictor.h"

namespace dscale::dvl {
namespace {

std::vector<float> Normal(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// Acceptance-like probabilities: a random decay per request.
std::vector<float> Probabilities(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(0.5f, 1.0f);
  std::vector<float> p(static_cast<size_t>(n) * kDraftPositions);
  for (int64_t i = 0; i < n; ++i) {
    const float decay = unit(rng);
    float value = 1.0f;
    for (int j = 0; j < kDraftPositions; ++j) p[i * kDraftPositions + j] = value *= decay;
  }
  return p;
}

// The projections for (hidden, vocab), with the logit projection folded through a random LM head
// [vocab, hidden] when `folded` (as the runtime folds it for a drafter without a correcting head).
Projections ProjectionsFor(int64_t hidden, int64_t vocab, bool folded) {
  Projections proj = MakeProjections(hidden, vocab, 1);
  if (folded) {
    FoldLogitProjection(proj, [hidden](int64_t first, int64_t count, float* out) {
      const std::vector<float> rows = Normal(count * hidden, 0.02f, static_cast<uint32_t>(first));
      std::copy(rows.begin(), rows.end(), out);
    });
  }
  return proj;
}

// Folding at load: one pass over the LM head.
void BM_FoldLogitProjection(benchmark::State& state) {
  const int64_t vocab = state.range(0);
  const int64_t hidden = state.range(1);
  const std::vector<float> head = Normal(vocab * hidden, 0.02f, 5);
  const Projections made = MakeProjections(hidden, vocab, 1);
  for (auto _ : state) {
    state.PauseTiming();
    Projections proj = made;
    state.ResumeTiming();
    FoldLogitProjection(proj, [&](int64_t first, int64_t count, float* out) {
      std::copy_n(head.data() + first * hidden, count * hidden, out);
    });
    benchmark::DoNotOptimize(proj.head_logit.data());
  }
}
BENCHMARK(BM_FoldLogitProjection)->Args({151936, 2048})->Unit(benchmark::kMillisecond);

// Args: vocabulary, hidden size, whether the logit projection is folded through the head.
void BM_ExtractFeatures(benchmark::State& state) {
  const int64_t vocab = state.range(0);
  const int64_t hidden = state.range(1);
  const Projections proj = ProjectionsFor(hidden, vocab, state.range(2) != 0);
  const std::vector<float> logits = Normal(kDraftPositions * vocab, 3.0f, 2);
  const std::vector<float> hidden_states = Normal(kDraftPositions * hidden, 1.0f, 3);
  std::vector<float> out(kFeatureCount);
  for (auto _ : state) {
    ExtractFeatures(logits.data(), hidden_states.data(), 32, proj, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel("per request");
}
BENCHMARK(BM_ExtractFeatures)
    ->Args({151936, 4096, 0})
    ->Args({151936, 4096, 1})
    ->Args({151936, 2560, 0})
    ->Args({151936, 2560, 1})
    ->Unit(benchmark::kMillisecond);

// One step's batch: the whole decision input of n requests at once (args: vocabulary, hidden
// size, n, folded).
void BM_ExtractFeaturesBatch(benchmark::State& state) {
  const int64_t vocab = state.range(0);
  const int64_t hidden = state.range(1);
  const int64_t n = state.range(2);
  const Projections proj = ProjectionsFor(hidden, vocab, state.range(3) != 0);
  const std::vector<float> logits = Normal(n * kDraftPositions * vocab, 3.0f, 2);
  const std::vector<float> hidden_states = Normal(n * kDraftPositions * hidden, 1.0f, 3);
  std::vector<float> out(n * kFeatureCount);
  for (auto _ : state) {
    ExtractFeaturesBatch(logits.data(), hidden_states.data(), n, n, proj, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel("per step");
}
BENCHMARK(BM_ExtractFeaturesBatch)
    ->Args({4160, 256, 16, 0})  // the bundled tiny pair at c = 16
    ->Args({4160, 256, 16, 1})
    ->Args({151936, 4096, 8, 0})
    ->Args({151936, 4096, 8, 1})
    ->Unit(benchmark::kMillisecond);

void BM_PredictorForward(benchmark::State& state) {
  const int64_t n = state.range(0);
  PredictorWeights w = PredictorWeights::Zeros();
  w.w1 = Normal(w.w1.size(), 0.05f, 4);
  const Predictor predictor(MakeProjections(16, 16, 1), std::move(w));
  const std::vector<float> features = Normal(static_cast<size_t>(n) * kFeatureCount, 1.0f, 5);
  std::vector<float> logits(static_cast<size_t>(n) * kDraftPositions);
  for (auto _ : state) {
    predictor.Forward(features.data(), n, logits.data());
    benchmark::DoNotOptimize(logits.data());
  }
}
BENCHMARK(BM_PredictorForward)->Arg(8)->Arg(32)->Arg(64)->Unit(benchmark::kMicrosecond);

void BM_Allocate(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> probs = Probabilities(n, 6);
  std::vector<float> q(static_cast<size_t>(n) * kBlockWidth);
  std::vector<int32_t> seed(n), k(n), offsets(n + 1);
  int64_t updates = 0;
  for (auto _ : state) {
    PrefixScoresFromProbs(probs.data(), n, kBlockWidth, q.data());
    updates = AllocateInto(q.data(), n, kBlockWidth, 8 * n, seed.data(), k.data(), offsets.data());
    benchmark::DoNotOptimize(offsets.data());
  }
  state.counters["updates"] = static_cast<double>(updates);
}
BENCHMARK(BM_Allocate)->Arg(8)->Arg(32)->Arg(64)->Unit(benchmark::kMicrosecond);

void BM_Pack(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Allocation a = AllocateFromProbs(Probabilities(n, 7).data(), n, 8 * n).value();
  const std::vector<int32_t> page_table(1, 0);
  StepBatch blocks;
  for (int64_t i = 0; i < n; ++i) {
    blocks.BeginSpan(static_cast<int32_t>(i), 0, page_table.data());
    for (int j = 0; j < kBlockWidth; ++j) blocks.AddRow(1, 1, /*logits=*/false);
  }
  WorkspacePool pool{BucketConfig{}};
  BucketStep* ws = pool.ForLiveCount(n).value();
  for (auto _ : state) {
    benchmark::DoNotOptimize(Pack(blocks, a.k, ws).ok());
  }
}
BENCHMARK(BM_Pack)->Arg(32)->Arg(64)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace dscale::dvl

BENCHMARK_MAIN();
