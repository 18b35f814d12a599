#include "model/expert_products.h"

#include <cstring>

#include "core/check.h"
#include "kernels/cpu/activation.h"

namespace dscale {
namespace {

// Below this many values the row loops stay on one thread.
constexpr int64_t kParallelMinValues = int64_t{1} << 15;

// Experts smaller than this (hidden · intermediate) run one after another, each on the threads.
constexpr int64_t kParallelMinExpertWeights = int64_t{1} << 16;

bool HasF32Blocks(const WeightMatrix& w) {
  for (const WeightMatrix::Block& b : w.blocks()) {
    if (b.format == WeightFormat::kF32) return true;
  }
  return false;
}

bool HasF32Blocks(const SparseMlpWeights& moe) {
  for (const ExpertWeights& e : moe.experts) {
    if (HasF32Blocks(e.gate_up) || HasF32Blocks(e.down)) return true;
  }
  return false;
}

// s.starts and s.order: a counting sort of the entries r·k + j by expert, stable (rows
// ascending within an expert); s.entry the inverse.
void GroupByExpert(const ExpertRoutes& routes, int32_t rows, int64_t experts, ExpertScratch& s) {
  const int64_t entries = int64_t{rows} * routes.k;
  s.starts.assign(static_cast<size_t>(experts + 1), 0);
  for (int64_t i = 0; i < entries; ++i) {
    const int32_t e = routes.ids[i];
    DSCALE_CHECK(e >= 0 && e < experts);
    ++s.starts[static_cast<size_t>(e) + 1];
  }
  for (int64_t e = 0; e < experts; ++e) s.starts[e + 1] += s.starts[e];
  s.next.assign(s.starts.begin(), s.starts.end() - 1);
  s.order.resize(static_cast<size_t>(entries));
  s.entry.resize(static_cast<size_t>(entries));
  for (int64_t i = 0; i < entries; ++i) {
    const int32_t at = s.next[static_cast<size_t>(routes.ids[i])]++;
    s.order[static_cast<size_t>(at)] = static_cast<int32_t>(i);
    s.entry[static_cast<size_t>(i)] = at;
  }
}

// One expert over its grouped rows [begin, begin + n) of s.in into the same rows of s.out.
void RunExpert(const ExpertWeights& w, int64_t hidden, int64_t begin, int64_t n,
               ActivationModes activations, ExpertScratch& s) {
  const int64_t inter = w.down.cols();
  float* gate_up = s.gate_up.data() + begin * 2 * inter;
  float* act = s.act.data() + begin * inter;
  Project(s.in.data() + begin * hidden, w.gate_up, gate_up, n, /*accumulate=*/false, activations);
  cpu::SwiGlu(gate_up, act, n, inter);
  Project(act, w.down, s.out.data() + begin * hidden, n, /*accumulate=*/false, activations);
}

// The shared expert over every row, into s.shared_out [rows, hidden], and its gate's logits into
// s.shared_logit [rows].
void RunSharedExpert(const float* normed, const SparseMlpWeights& moe, int64_t hidden, int32_t rows,
                     ActivationModes activations, ExpertScratch& s) {
  const int64_t inter = moe.shared.down.cols();
  s.shared_gate_up.resize(static_cast<size_t>(rows * 2 * inter));
  s.shared_act.resize(static_cast<size_t>(rows * inter));
  s.shared_out.resize(static_cast<size_t>(rows * hidden));
  s.shared_logit.resize(static_cast<size_t>(rows));
  Project(normed, moe.shared.gate_up, s.shared_gate_up.data(), rows, /*accumulate=*/false,
          activations);
  cpu::SwiGlu(s.shared_gate_up.data(), s.shared_act.data(), rows, inter);
  Project(s.shared_act.data(), moe.shared.down, s.shared_out.data(), rows, /*accumulate=*/false,
          activations);
  Project(normed, moe.shared_gate, s.shared_logit.data(), rows, /*accumulate=*/false, activations);
}

}  // namespace

int32_t ExpertProducts(const float* normed, const SparseMlpWeights& moe, int64_t hidden,
                       int32_t rows, const ExpertRoutes& routes, ActivationModes activations,
                       ExpertScratch& s, float* x) {
  const auto experts = static_cast<int64_t>(moe.experts.size());
  const int32_t k = routes.k;
  const int64_t entries = int64_t{rows} * k;
  if (entries == 0) return 0;
  GroupByExpert(routes, rows, experts, s);
  const int64_t inter = moe.experts[0].down.cols();
  s.in.resize(static_cast<size_t>(entries * hidden));
  s.gate_up.resize(static_cast<size_t>(entries * 2 * inter));
  s.act.resize(static_cast<size_t>(entries * inter));
  s.out.resize(static_cast<size_t>(entries * hidden));
  // Each entry's input row, in grouped order.
#pragma omp parallel for schedule(static) if (entries * hidden >= kParallelMinValues)
  for (int64_t at = 0; at < entries; ++at) {
    const int64_t row = s.order[static_cast<size_t>(at)] / k;
    std::memcpy(s.in.data() + at * hidden, normed + row * hidden,
                static_cast<size_t>(hidden) * sizeof(float));
  }
  // Each expert routed to reads its weights once, for all its rows.
  s.routed.clear();
  for (int64_t e = 0; e < experts; ++e) {
    if (s.starts[e + 1] > s.starts[e]) s.routed.push_back(static_cast<int32_t>(e));
  }
  const auto run = static_cast<int32_t>(s.routed.size());
  // Whole experts to each thread, taken in turn as threads free up: one fork and join per
  // layer rather than two per expert, and each thread streams whole weight matrices. Its
  // products run on the calling thread (a nested region has one), and a product's bits do not
  // depend on the thread that computes it. OpenBLAS's f32 products keep their own threads.
  const bool across_experts =
      run > 1 && !HasF32Blocks(moe) && hidden * inter >= kParallelMinExpertWeights;
#pragma omp parallel for schedule(dynamic, 1) if (across_experts)
  for (int32_t i = 0; i < run; ++i) {
    const int32_t e = s.routed[static_cast<size_t>(i)];
    const int64_t begin = s.starts[e], n = s.starts[e + 1] - begin;
    RunExpert(moe.experts[static_cast<size_t>(e)], hidden, begin, n, activations, s);
  }
  const bool shared = moe.has_shared();
  if (shared) RunSharedExpert(normed, moe, hidden, rows, activations, s);
    // Per row: Σ_j weight_j · out_j in rank order, plus the gated shared expert, then one add to
    // the residual stream.
#pragma omp parallel for schedule(static) if (entries * hidden >= kParallelMinValues)
  for (int32_t r = 0; r < rows; ++r) {
    float* xr = x + int64_t{r} * hidden;
    const float gate = shared ? cpu::Sigmoid(s.shared_logit[static_cast<size_t>(r)]) : 0.0f;
    const float* shared_row = shared ? s.shared_out.data() + int64_t{r} * hidden : nullptr;
    for (int64_t i = 0; i < hidden; ++i) {
      float sum = 0.0f;
      for (int32_t j = 0; j < k; ++j) {
        const int64_t at = s.entry[static_cast<size_t>(int64_t{r} * k + j)];
        sum += routes.weights[int64_t{r} * k + j] * s.out[static_cast<size_t>(at * hidden + i)];
      }
      if (shared) sum += gate * shared_row[i];
      xr[i] += sum;
    }
  }
  return run;
}

}  // namespace dscale
