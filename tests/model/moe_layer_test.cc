// The sparse MLP layer (Qwen3-MoE, and Qwen3.5-MoE's with a shared expert) on the CPU: the router's
// tie rule (its softmax, top-k and renormalisation against the double reference are the op table's
// route_top_k rows), and the whole block (router product, routing, experts grouped by expert)
// giving a row the same bits alone as in any batch — beside rows that share both its experts, one
// of them, or none — in every weight format and activation mode, on one and two threads.
// Speculative decoding is lossless only if a verified row's experts compute what a decoded row's
// do.

#include <gtest/gtest.h>
#include <omp.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/expert_router.h"
#include "model/cpu_ops.h"
#include "model/decoder_layer.h"
#include "model/quantize_weights.h"

namespace dscale {
namespace {

constexpr int64_t kHidden = 37;
constexpr int32_t kExperts = 6;
constexpr int32_t kTopK = 2;
constexpr int64_t kInter = 19;
constexpr int64_t kShared = 11;  // the shared expert's width (Qwen3.5-MoE)

std::vector<float> Normal(std::mt19937& rng, size_t n, float stddev) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

WeightMatrix InFormat(std::vector<float> values, int64_t rows, int64_t cols, WeightFormat f) {
  WeightMatrix f32 = WeightMatrix::FromF32(values, rows, cols);
  switch (f) {
    case WeightFormat::kBF16: {
      std::vector<uint16_t> bits(values.size());
      for (size_t i = 0; i < values.size(); ++i) bits[i] = F32ToBf16(values[i]);
      return WeightMatrix::FromBf16(std::move(bits), rows, cols);
    }
    case WeightFormat::kInt8:
      return QuantizeInt8(f32, cpu::Int8Activations::kInt8);
    case WeightFormat::kInt4:
      return QuantizeInt4(f32);
    case WeightFormat::kF32:
      break;
  }
  return f32;
}

// Router row e = 3·(unit vector e): a row whose input has spikes at dims a and b routes to
// experts a and b. Experts' matrices N(0, 1/in) in format `f`; the router stays f32. With
// `shared`, a shared expert in format `f` and its gate (f32) too.
SparseMlpWeights MakeWeights(WeightFormat f, uint32_t seed, bool shared = false) {
  std::mt19937 rng(seed);
  SparseMlpWeights w;
  std::vector<float> router(static_cast<size_t>(kExperts * kHidden), 0.0f);
  for (int32_t e = 0; e < kExperts; ++e) router[static_cast<size_t>(e * kHidden + e)] = 3.0f;
  w.router = WeightMatrix::FromF32(std::move(router), kExperts, kHidden);
  for (int32_t e = 0; e < kExperts; ++e) {
    ExpertWeights x;
    x.gate_up = InFormat(Normal(rng, 2 * kInter * kHidden, 1.0f / std::sqrt(float(kHidden))),
                         2 * kInter, kHidden, f);
    x.down = InFormat(Normal(rng, kHidden * kInter, 1.0f / std::sqrt(float(kInter))), kHidden,
                      kInter, f);
    w.experts.push_back(std::move(x));
  }
  if (shared) {
    w.shared.gate_up =
        InFormat(Normal(rng, 2 * kShared * kHidden, 1.0f / std::sqrt(float(kHidden))), 2 * kShared,
                 kHidden, f);
    w.shared.down = InFormat(Normal(rng, kHidden * kShared, 1.0f / std::sqrt(float(kShared))),
                             kHidden, kShared, f);
    w.shared_gate = WeightMatrix::FromF32(Normal(rng, kHidden, 0.5f), 1, kHidden);
  }
  return w;
}

// A normed row routed to experts a and b (a spike at each), the rest small noise.
std::vector<float> RoutedRow(std::mt19937& rng, int32_t a, int32_t b) {
  std::vector<float> row = Normal(rng, kHidden, 0.1f);
  row[static_cast<size_t>(a)] += 2.0f;
  row[static_cast<size_t>(b)] += 2.0f + 0.3f * (a % 2);
  return row;
}

LayerDims Dims(bool normalize) {
  return {
      .hidden = kHidden,
      .moe = {.experts = kExperts, .top_k = kTopK, .intermediate = kInter, .normalize = normalize}};
}

// x_out = x + the sparse block of `normed` (RunSparseMlp over CpuOps), rows [0, rows).
std::vector<float> Block(const SparseMlpWeights& w, const LayerDims& d, ActivationModes a,
                         const std::vector<float>& normed, const std::vector<float>& x) {
  CpuOps ops{.activations = a};
  LayerScratch s;
  std::vector<float> out = x;
  const auto rows = static_cast<int32_t>(x.size() / kHidden);
  RunSparseMlp(ops, w, d, rows, normed.data(), s, out.data());
  return out;
}

std::vector<float> Rows(const std::vector<float>& m, const std::vector<int32_t>& rows) {
  std::vector<float> out;
  for (int32_t r : rows) {
    out.insert(out.end(), m.begin() + r * kHidden, m.begin() + (r + 1) * kHidden);
  }
  return out;
}

bool SameBits(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}

// cpu::RouteTopK on a copy of `logits` (it overwrites its input).
void Route(std::vector<float> logits, int64_t rows, int64_t experts, int64_t k, bool normalize,
           int32_t* ids, float* weights) {
  cpu::RouteTopK(logits.data(), rows, experts, k, normalize, ids, weights);
}

TEST(ExpertRouterTest, TiesGoToTheLowerExpertAndWeightsAreTheProbabilities) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 0.0f, 3.0f};
  int32_t ids[2];
  float weights[2];
  Route(logits, 1, 5, 2, /*normalize=*/false, ids, weights);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 2);
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - 3.0);
  EXPECT_NEAR(weights[0], 1.0 / sum, 1e-6);
  EXPECT_EQ(weights[0], weights[1]);
  Route(logits, 1, 5, 2, /*normalize=*/true, ids, weights);
  EXPECT_EQ(weights[0], 0.5f);
  EXPECT_EQ(weights[1], 0.5f);
  // All equal: the first k experts, in order; a NaN row still names k distinct experts.
  const std::vector<float> flat(7, 0.25f);
  int32_t ids3[3];
  float w3[3];
  Route(flat, 1, 7, 3, true, ids3, w3);
  EXPECT_EQ(std::vector<int32_t>(ids3, ids3 + 3), (std::vector<int32_t>{0, 1, 2}));
  Route({0.5f, NAN, 1.0f, 0.0f}, 1, 4, 3, true, ids3, w3);
  EXPECT_EQ(std::set<int32_t>(ids3, ids3 + 3).size(), 3u);
}

struct Case {
  WeightFormat format;
  ActivationModes activations;
  std::string name;
};

std::vector<Case> Cases() {
  using B = cpu::Bf16Activations;
  using I = cpu::Int8Activations;
  return {{WeightFormat::kF32, {}, "f32"},
          {WeightFormat::kBF16, {.bf16 = B::kF32}, "bf16"},
          {WeightFormat::kBF16, {.bf16 = B::kBf16}, "bf16 x bf16-activations"},
          {WeightFormat::kInt8, {.int8 = I::kF32}, "int8"},
          {WeightFormat::kInt8, {.int8 = I::kInt8}, "int8 x int8-activations"},
          {WeightFormat::kInt4, {.int8 = I::kInt8}, "int4 x int8-activations"}};
}

std::vector<std::pair<Case, bool>> CasesWithAndWithoutSharedExpert() {
  std::vector<std::pair<Case, bool>> out;
  for (const Case& c : Cases()) {
    out.emplace_back(c, false);
    out.emplace_back(Case{c.format, c.activations, c.name + " + shared expert"}, true);
  }
  return out;
}

// Double SwiGLU of one expert's f32 weights (gate_up [2·inter, hidden], down [hidden, inter]).
std::vector<double> ExpertD(const ExpertWeights& w, int64_t inter, const float* in) {
  const std::vector<float> gu = w.gate_up.ToF32(), dn = w.down.ToF32();
  std::vector<double> act(inter), y(kHidden, 0.0);
  for (int64_t j = 0; j < inter; ++j) {
    double g = 0, u = 0;
    for (int64_t i = 0; i < kHidden; ++i) {
      g += double(gu[j * kHidden + i]) * in[i];
      u += double(gu[(inter + j) * kHidden + i]) * in[i];
    }
    act[j] = g / (1 + std::exp(-g)) * u;
  }
  for (int64_t o = 0; o < kHidden; ++o) {
    for (int64_t j = 0; j < inter; ++j) y[o] += double(dn[o * inter + j]) * act[j];
  }
  return y;
}

// Rows 0-1 share both experts, row 2 shares one with them, row 3 is alone on experts 4 and 5,
// and 150 more rows (past a row block, kernels/cpu/row_blocks.h) route among experts 0-3.
TEST(SparseMlpTest, ARowsBitsDoNotDependOnTheRowsBesideIt) {
  std::mt19937 rng(11);
  std::vector<std::pair<int32_t, int32_t>> routes = {{0, 1}, {1, 0}, {1, 2}, {4, 5}};
  std::uniform_int_distribution<int32_t> pick(0, 3);
  while (routes.size() < 154) {
    const int32_t a = pick(rng), b = pick(rng);
    if (a != b) routes.emplace_back(a, b);
  }
  std::vector<float> normed, x;
  for (const auto& [a, b] : routes) {
    const std::vector<float> row = RoutedRow(rng, a, b);
    normed.insert(normed.end(), row.begin(), row.end());
  }
  x = Normal(rng, normed.size(), 1.0f);
  for (const auto& [c, shared] : CasesWithAndWithoutSharedExpert()) {
    const SparseMlpWeights w = MakeWeights(c.format, 5, shared);
    for (const bool normalize : {true, false}) {
      const LayerDims d = Dims(normalize);
      for (const int threads : {1, 2}) {
        omp_set_num_threads(threads);
        const std::vector<float> all = Block(w, d, c.activations, normed, x);
        // Each of the first rows alone, and a subset out of order.
        for (int32_t r = 0; r < 6; ++r) {
          const std::vector<float> alone =
              Block(w, d, c.activations, Rows(normed, {r}), Rows(x, {r}));
          EXPECT_TRUE(SameBits(alone.data(), all.data() + r * kHidden, kHidden))
              << c.name << " row " << r << " threads " << threads;
        }
        const std::vector<int32_t> subset = {3, 140, 2, 0, 77, 1};
        const std::vector<float> some =
            Block(w, d, c.activations, Rows(normed, subset), Rows(x, subset));
        for (size_t i = 0; i < subset.size(); ++i) {
          EXPECT_TRUE(
              SameBits(some.data() + i * kHidden, all.data() + subset[i] * kHidden, kHidden))
              << c.name << " row " << subset[i] << " in a subset";
        }
      }
      omp_set_num_threads(1);
    }
  }
}

// With the batch's spans the block counts the distinct experts among each span's first 1, 2, 4,
// … 256 rows (core/expert_occupancy.h): a span of 4 rows routed to {0,1}, {0,1}, {1,2},
// {3,4} wakes 2, 2 and 5; a span of one row {5,4} wakes 2; neither reaches 8 rows.
TEST(SparseMlpTest, CountsTheExpertsEachSpansFirstRowsWake) {
  std::mt19937 rng(6);
  const SparseMlpWeights w = MakeWeights(WeightFormat::kF32, 3);
  std::vector<float> normed;
  for (const auto& [a, b] :
       std::vector<std::pair<int32_t, int32_t>>{{0, 1}, {0, 1}, {1, 2}, {3, 4}, {5, 4}}) {
    const std::vector<float> row = RoutedRow(rng, a, b);
    normed.insert(normed.end(), row.begin(), row.end());
  }
  std::vector<float> x(normed.size(), 0.0f);
  const StepSpan spans[] = {{.q_start = 0, .q_len = 4}, {.q_start = 4, .q_len = 1}};
  const BatchView batch{.rows = 5, .spans = spans, .num_spans = 2};
  CpuOps ops;
  LayerScratch s;
  RunSparseMlp(ops, w, Dims(true), 5, normed.data(), s, x.data(), &batch);
  EXPECT_EQ(s.occupancy.distinct, (std::array<double, 9>{4, 2, 5, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(s.occupancy.count, (std::array<int64_t, 9>{2, 1, 1, 0, 0, 0, 0, 0, 0}));
  // Without a batch nothing is counted; the output is the same.
  LayerScratch plain;
  std::vector<float> y(normed.size(), 0.0f);
  RunSparseMlp(ops, w, Dims(true), 5, normed.data(), plain, y.data());
  EXPECT_TRUE(plain.occupancy.empty());
  EXPECT_EQ(x, y);
}

// The block against a double computation of the same function on the same (f32) weights, with
// and without a shared expert (its output scaled by sigmoid(shared_gate · x) and added).
TEST(SparseMlpTest, ComputesTheWeightedSumOfTheRoutedExperts) {
  std::mt19937 rng(4);
  const std::vector<std::pair<int32_t, int32_t>> routes = {{0, 3}, {5, 2}, {1, 4}};
  for (const auto& [normalize, shared] :
       {std::pair{true, false}, std::pair{false, false}, std::pair{true, true}}) {
    const SparseMlpWeights w = MakeWeights(WeightFormat::kF32, 9, shared);
    std::vector<float> normed;
    for (const auto& [a, b] : routes) {
      const std::vector<float> row = RoutedRow(rng, a, b);
      normed.insert(normed.end(), row.begin(), row.end());
    }
    const std::vector<float> x(normed.size(), 0.0f);
    const std::vector<float> got = Block(w, Dims(normalize), {}, normed, x);
    const std::vector<float> router = w.router.ToF32();
    for (size_t r = 0; r < routes.size(); ++r) {
      const float* in = normed.data() + r * kHidden;
      std::vector<double> p(kExperts);
      double sum = 0;
      for (int32_t e = 0; e < kExperts; ++e) {
        double l = 0;
        for (int64_t i = 0; i < kHidden; ++i) l += double(router[e * kHidden + i]) * in[i];
        sum += p[e] = std::exp(l);
      }
      const std::set<int32_t> want = {routes[r].first, routes[r].second};
      const double chosen = p[routes[r].first] + p[routes[r].second];
      std::vector<double> y(kHidden, 0.0);
      for (const int32_t e : want) {
        const double weight = normalize ? p[e] / chosen : p[e] / sum;
        const std::vector<double> v = ExpertD(w.experts[e], kInter, in);
        for (int64_t o = 0; o < kHidden; ++o) y[o] += weight * v[o];
      }
      if (shared) {
        const std::vector<float> g = w.shared_gate.ToF32();
        double logit = 0;
        for (int64_t i = 0; i < kHidden; ++i) logit += double(g[i]) * in[i];
        const std::vector<double> v = ExpertD(w.shared, kShared, in);
        for (int64_t o = 0; o < kHidden; ++o) y[o] += v[o] / (1 + std::exp(-logit));
      }
      for (int64_t o = 0; o < kHidden; ++o) {
        EXPECT_NEAR(got[r * kHidden + o], y[o], 1e-5 * (1 + std::fabs(y[o])))
            << "row " << r << " normalize " << normalize << " shared " << shared;
      }
    }
  }
}

}  // namespace
}  // namespace dscale
