#include "budget/auto_budget.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "budget/cost_curve.h"
#include "budget/simulation.h"
#include "dvl/budget_allocator.h"

namespace dscale::budget {
namespace {

constexpr int kW = 16;

// The curve of n requests whose draft j survives with probability p_j = p_{j−1} · factor(),
// p_{−1} = 1 (with `row_costs`, what each row position costs: AutoBudget::RowCosts).
dvl::BudgetCurve CurveOfSurvivals(int64_t n, const std::function<float()>& factor,
                                  std::span<const double> row_costs = {}) {
  std::vector<float> probs(static_cast<size_t>(n) * (kW - 1));
  for (int64_t i = 0; i < n; ++i) {
    float p = 1;
    for (int j = 0; j < kW - 1; ++j) probs[i * (kW - 1) + j] = p *= factor();
  }
  std::vector<float> q(static_cast<size_t>(n) * kW);
  dvl::PrefixScoresFromProbs(probs.data(), n, kW, q.data());
  dvl::BudgetCurve curve;
  dvl::ExpectedTokensCurve(q.data(), n, kW, &curve, row_costs);
  return curve;
}

dvl::BudgetCurve RandomCurve(std::mt19937& rng, int64_t n) {
  std::uniform_real_distribution<float> unit(0.02f, 0.98f);
  return CurveOfSurvivals(n, [&] { return std::sqrt(unit(rng)); });
}

// Step-time shapes: linear (a CPU), roofline (a GPU: flat until the compute knee), stepped
// (tile quantisation).
std::vector<std::function<double(int64_t)>> PlantedCosts() {
  return {[](int64_t m) { return 2e-3 + 3e-4 * double(m); },
          [](int64_t m) { return std::max(20e-3, 20e-3 * double(m) / 90); },
          [](int64_t m) { return 1e-3 + 4e-3 * std::ceil(double(m) / 48); }};
}

TEST(AutoBudgetTest, BestRowsMaximisesTokensPerSecondOnPlantedCurves) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 24);
    const dvl::BudgetCurve curve = RandomCurve(rng, n);
    const int64_t other = static_cast<int64_t>(rng() % 5);
    for (const auto& cost : PlantedCosts()) {
      const auto seconds = [&](int64_t m) { return 1e-3 + cost(other + m); };
      const int64_t best = BestRows(curve, other, 1.0, seconds);
      const double best_rate = ExpectedTokens(curve, best, other, 1.0) / seconds(best);
      for (int64_t m = n; m <= kW * n; ++m) {
        const double rate = ExpectedTokens(curve, m, other, 1.0) / seconds(m);
        ASSERT_LE(rate, best_rate) << "trial " << trial << " M " << m << " best " << best;
        if (m < best) {
          ASSERT_LT(rate, best_rate) << "ties go to the smaller M";
        }
      }
    }
  }
}

// On a roofline whose knee sits at W·N/2 rows, and scores strictly between 0 and 1, rows are
// free up to the knee and cost more than they return after it: M* = W·N/2 exactly.
TEST(AutoBudgetTest, RooflineWithKneeAtHalfTheBlockGivesThePapersBudget) {
  std::mt19937 rng(5);
  for (int64_t n : {1, 4, 16, 32}) {
    const dvl::BudgetCurve curve = RandomCurve(rng, n);
    const double knee = kW * n / 2.0;
    const auto seconds = [&](int64_t m) { return std::max(10e-3, 10e-3 * double(m) / knee); };
    EXPECT_EQ(BestRows(curve, 0, 1.0, seconds), kW * n / 2) << "n " << n;
  }
}

// A GPU-like step with 8 requests: verifying is memory-bound (10 ms) up to the knee at
// W·N/2 = 64 rows; drafting costs 0.2 ms a request.
double GpuVerifySeconds(int64_t rows) { return std::max(10e-3, 10e-3 * double(rows) / 64); }

// The ramp drafts one request (anchors only) to measure drafting; the first rows step (every
// request, two rows each) then fits the loss budget, so it drafts all 8 and doubles the rows
// per request while the fit still puts M* at the largest rows seen: 16, 32, 64, then 128, past
// the knee, where M* falls back inside. After the ramp M* is the knee.
TEST(AutoBudgetTest, ColdStartRampsFromOneRequestToEveryRequestThenDoublesRowsPastTheKnee) {
  std::mt19937 rng(6);
  AutoBudget controller;
  std::vector<std::pair<int32_t, int64_t>> ramp;  // (drafted requests, M)
  while (controller.Snapshot().cold_start || ramp.empty()) {
    ASSERT_LT(ramp.size(), 20u);
    const int32_t n = controller.DraftCount(8, 8);
    ASSERT_GT(n, 0) << "the ramp is affordable here";
    const dvl::BudgetCurve curve = RandomCurve(rng, n);
    const int64_t m = controller.ChooseRows(curve, 8 - n, 0.2e-3 * n);
    ramp.emplace_back(n, m);
    const int64_t rows = 8 - n + m;
    controller.Record({.requests = 8,
                       .drafted = n,
                       .rows = rows,
                       .draft_s = 0.2e-3 * n,
                       .verify_s = GpuVerifySeconds(rows)},
                      std::llround(curve.At(m)));
  }
  using Steps = std::vector<std::pair<int32_t, int64_t>>;
  EXPECT_EQ(ramp, (Steps{{1, 1}, {8, 16}, {8, 32}, {8, 64}, {8, 128}}));
  EXPECT_EQ(controller.mode(), AutoMode::kSpeculate);
  EXPECT_LT(controller.Snapshot().explore_loss_s, 0) << "the rows steps already gain";
  ASSERT_EQ(controller.DraftCount(8, 8), 8);
  EXPECT_EQ(controller.ChooseRows(RandomCurve(rng, 8), 0, 1.6e-3), 64);
}

// Mixed prefill: a step whose pass also ran prompt rows timed them with the verify. Here each
// ramp step first comes with a prompt that makes it 10× slower: the ramp takes it again, and the
// steps it climbs by, the fitted verify and the mode are those of the ramp without prompts.
TEST(AutoBudgetTest, AStepThatAlsoRanPromptRowsTeachesNothingOfTheVerify) {
  std::mt19937 rng(6);
  AutoBudget controller;
  std::vector<std::pair<int32_t, int64_t>> ramp;  // (drafted requests, M) of the timed steps
  int64_t untimed = 0;
  while (controller.Snapshot().cold_start || ramp.empty()) {
    ASSERT_LT(ramp.size(), 20u);
    for (const int64_t prompt_rows : {int64_t{300}, int64_t{0}}) {
      const int32_t n = controller.DraftCount(8, 8);
      ASSERT_GT(n, 0) << "the ramp is affordable here";
      const dvl::BudgetCurve curve = RandomCurve(rng, n);
      const int64_t m = controller.ChooseRows(curve, 8 - n, 0.2e-3 * n);
      const int64_t rows = 8 - n + m;
      const double verify_s = GpuVerifySeconds(rows) * (prompt_rows > 0 ? 10.0 : 1.0);
      if (prompt_rows == 0) {
        ramp.emplace_back(n, m);
      } else {
        ++untimed;
      }
      controller.Record({.requests = 8,
                         .drafted = n,
                         .rows = rows,
                         .draft_s = 0.2e-3 * n,
                         .verify_s = verify_s,
                         .prompt_rows = prompt_rows},
                        std::llround(curve.At(m)));
      if (!controller.Snapshot().cold_start && prompt_rows == 0) break;
    }
  }
  using Steps = std::vector<std::pair<int32_t, int64_t>>;
  EXPECT_EQ(ramp, (Steps{{1, 1}, {8, 16}, {8, 32}, {8, 64}, {8, 128}}));
  EXPECT_EQ(untimed, static_cast<int64_t>(ramp.size()));
  EXPECT_EQ(controller.model().verify().samples(), static_cast<int64_t>(ramp.size()))
      << "only the steps that timed the verify alone are fitted";
  EXPECT_EQ(controller.mode(), AutoMode::kSpeculate);
  ASSERT_EQ(controller.DraftCount(8, 8), 8);
  EXPECT_EQ(controller.ChooseRows(RandomCurve(rng, 8), 0, 1.6e-3), 64);
}

// Timing noise is one-sided: a step slowed 3× by other work, alone in its bin, is capped at the
// cheapest bin of more rows instead of being averaged with its neighbours (which made rows past
// the knee look free and the controller verify past it).
TEST(AutoBudgetTest, OneSlowedSampleInASparseBinDoesNotMoveTheBestChoice) {
  const auto fill = [](CostCurve* curve, double seconds_at_64) {
    for (int i = 0; i < 5; ++i) curve->Add(16, 20e-3);
    curve->Add(32, 20e-3);
    curve->Add(64, seconds_at_64);
    for (int i = 0; i < 5; ++i) curve->Add(128, 20e-3);
    for (int i = 0; i < 3; ++i) curve->Add(162, 20e-3 * 162 / 128);
    curve->Add(256, 40e-3);
  };
  CostCurve clean, slowed;
  fill(&clean, 20e-3);
  fill(&slowed, 60e-3);
  EXPECT_LE(slowed.Predict(64), slowed.Predict(128) * 1.001);
  std::mt19937 rng(9);
  for (int trial = 0; trial < 20; ++trial) {
    const dvl::BudgetCurve curve = RandomCurve(rng, 16);
    const auto best = [&](const CostCurve& cost) {
      return BestRows(curve, 0, 1.0, [&](int64_t m) { return 1e-3 + cost.Predict(double(m)); });
    };
    EXPECT_EQ(best(slowed), best(clean)) << "trial " << trial;
    EXPECT_EQ(best(clean), 128) << "trial " << trial;
  }
}

TEST(AutoBudgetTest, CalibrationFollowsTheTokensActuallyCommitted) {
  std::mt19937 rng(8);
  AutoBudget controller({.cold_start = false});
  for (int i = 0; i < 60; ++i) {
    const dvl::BudgetCurve curve = RandomCurve(rng, 8);
    const int64_t m = controller.ChooseRows(curve, 0, 1e-3);
    const double extra = curve.At(m) - 8;  // the predictor promised this many drafts; half came
    controller.Record({.requests = 8, .drafted = 8, .rows = m, .draft_s = 1e-3, .verify_s = 2e-3},
                      8 + std::llround(0.5 * extra));
  }
  EXPECT_NEAR(controller.Snapshot().calibration, 0.5, 0.1);
}

// Request i's draft j survives with probability alpha^(j+1) (n requests).
dvl::BudgetCurve GeometricCurve(int64_t n, float alpha) {
  return CurveOfSurvivals(n, [alpha] { return alpha; });
}

// The prior (a calibrated predictor) keeps its weight, (1 − 1/32)^k after k drafted steps,
// however many draft tokens the first steps predicted: a cold start's first steps verify a row
// or two and predict a fraction of a token, and when the prior weighed as much as the first
// step's prediction, a few early steps that committed none of their drafts (the first blocks
// of an answer) took the calibration from 1 to about 0.4, so every gain looked 40% smaller.
TEST(AutoBudgetTest, CalibrationKeepsThePriorsWeightWhateverTheFirstStepPredicted) {
  for (const float first_alpha : {0.05f, 0.95f}) {
    AutoBudget controller({.cold_start = false});
    int counted = 0;
    for (int i = 0; i < 8; ++i) {
      const dvl::BudgetCurve curve = GeometricCurve(2, i == 0 ? first_alpha : 0.8f);
      const int64_t m = controller.ChooseRows(curve, 0, 1e-3);
      if (curve.At(m) - 2 > 0.02) ++counted;
      controller.Record({.requests = 2, .drafted = 2, .rows = m, .draft_s = 1e-3, .verify_s = 2e-3},
                        2);  // no draft accepted
    }
    ASSERT_GE(counted, 7) << "first alpha " << first_alpha;
    EXPECT_NEAR(controller.Snapshot().calibration, std::pow(1 - 1.0 / 32, counted), 1e-9)
        << "first alpha " << first_alpha;
  }
}

SimulatedPair GpuLike() { return GpuShapedPair(128); }  // knee at W·N/2 for N = 16
SimulatedPair CpuLike() { return CpuShapedPair(); }

// Median over drafted steps from `from` on of the rows per drafted request (W/2 = 8: the paper's).
double MedianRowsPerDraftedRequest(const SimulationResult& r, size_t from) {
  std::vector<double> rows;
  for (size_t i = from; i < r.steps.size(); ++i) {
    if (r.steps[i].drafted > 0)
      rows.push_back(double(r.steps[i].drafted_rows) / r.steps[i].drafted);
  }
  if (rows.empty()) return 0;
  std::nth_element(rows.begin(), rows.begin() + rows.size() / 2, rows.end());
  return rows[rows.size() / 2];
}

// The simulation draws with common random numbers (streams keyed by request and by step), so
// auto and the paper's budget serve the same requests on the same noisy steps and the 0.97
// compares their decisions only; before, one shared stream gave each run different requests
// and acceptance, and the ratio moved by ±4% with the seed alone. Over seeds 1–30 auto gives
// 0.968–0.985 of the paper's tokens/s here (29 of 30 ≥ 0.97; the shortfall is the ramp's first
// steps and the periodic exploration, about 2% of a 400-step run), 8 rows per request.
TEST(AutoBudgetTest, ConvergesNearHalfTheBlockOnAGpuShapedCurve) {
  AutoBudget controller;
  const SimulationOptions options{.concurrency = 16, .steps = 400, .seed = 11};
  const SimulationResult run = Simulate(GpuLike(), {}, options, &controller);
  EXPECT_EQ(controller.mode(), AutoMode::kSpeculate);
  const double m = MedianRowsPerDraftedRequest(run, 100);
  EXPECT_GE(m, 0.85 * 8);
  EXPECT_LE(m, 1.1 * 8);
  const SimulationResult paper =
      Simulate(GpuLike(), {.kind = SimulatedPolicy::kFraction, .fraction = 0.5}, options, nullptr);
  const SimulationResult plain =
      Simulate(GpuLike(), {.kind = SimulatedPolicy::kPlain}, options, nullptr);
  EXPECT_GE(run.tokens_per_second, 0.97 * paper.tokens_per_second);
  EXPECT_GT(run.tokens_per_second, 1.5 * plain.tokens_per_second);
}

// The first step `run` took in plain mode (its length if none).
size_t FirstPlainStep(const SimulationResult& run) {
  const auto plain = std::find_if(run.steps.begin(), run.steps.end(), [](const SimulatedStep& s) {
    return s.mode == AutoMode::kPlain;
  });
  return static_cast<size_t>(plain - run.steps.begin());
}

TEST(AutoBudgetTest, SettlesOnPlainDecodingWhenSpeculationCostsMoreThanItReturns) {
  for (int32_t c : {1, 4, 16}) {
    AutoBudget controller;
    const SimulationOptions options{.concurrency = c, .steps = 4000, .seed = 12};
    const SimulationResult run = Simulate(CpuLike(), {}, options, &controller);
    EXPECT_EQ(controller.mode(), AutoMode::kPlain) << "c " << c;
    // Bounded: plain within the cold steps and a few more drafted steps.
    const size_t first_plain = FirstPlainStep(run);
    EXPECT_LE(first_plain, 12u) << "c " << c;
    const SimulationResult plain =
        Simulate(CpuLike(), {.kind = SimulatedPolicy::kPlain}, options, nullptr);
    EXPECT_GE(run.tokens_per_second, 0.97 * plain.tokens_per_second) << "c " << c;
  }
}

// Short runs at high concurrency, where the cold start is a large share of the run: 16
// requests of 100 tokens on the 1.7B-shaped CPU pair, where drafting every request costs more
// than three plain steps at c = 16. The ramp's bounded loss keeps auto within 3% of plain.
TEST(AutoBudgetTest, NeverSlowerThanPlainOnShortRunsOfA17BShapedCpuPair) {
  for (int32_t c : {1, 4, 16}) {
    AutoBudget controller;
    const SimulationOptions options{
        .concurrency = c, .tokens_per_request = 100, .steps = 100000, .requests = 16, .seed = 15};
    const SimulationResult run = Simulate(Cpu17BShapedPair(), {}, options, &controller);
    const SimulationResult plain =
        Simulate(Cpu17BShapedPair(), {.kind = SimulatedPolicy::kPlain}, options, nullptr);
    int64_t tokens = 0;
    for (const SimulatedStep& step : run.steps) tokens += step.committed;
    EXPECT_GE(tokens, 16 * 100) << "c " << c << ": every request ran to its end";
    EXPECT_GE(run.tokens_per_second, 0.97 * plain.tokens_per_second) << "c " << c;
  }
}

// Tokens per second of the best of plain decoding, fixed:K (K = 4, 8, 12), dflash (fixed:W)
// and the paper's W·N/2, simulated with the same seed.
double BestOtherPolicy(const SimulatedPair& pair, const SimulationOptions& options) {
  double best = 0;
  for (const SimulatedPolicy& policy :
       {SimulatedPolicy{.kind = SimulatedPolicy::kPlain},
        SimulatedPolicy{.kind = SimulatedPolicy::kFraction, .fraction = 0.5},
        SimulatedPolicy{.kind = SimulatedPolicy::kFixed, .rows = 4},
        SimulatedPolicy{.kind = SimulatedPolicy::kFixed, .rows = 8},
        SimulatedPolicy{.kind = SimulatedPolicy::kFixed, .rows = 12},
        SimulatedPolicy{.kind = SimulatedPolicy::kFixed, .rows = kW}}) {
    best = std::max(best, Simulate(pair, policy, options, nullptr).tokens_per_second);
  }
  return best;
}

// The 1.7B shape on two CPU cores with realistic acceptance: drafting one request costs about
// half a plain step, and 8 rows 1.4 plain steps for τ ≈ 2.7, so speculating pays at one request
// (the best fixed policy about 1.19× plain here) and not at two or more. The cold start's first
// rows step (worst case: drafting plus a second plain step, at two rows) does not fit the loss
// budget after the first drafted step; it waits a few plain steps for the budget to grow
// instead of settling on plain decoding for good. At one request each request's acceptance
// decides on its own, so auto turns to plain on a poor request and its probes (short, and
// charged to the loss budget) bring it back on a good one. Mean tokens/s over seeds 1–8 of
// 2000 steps (about 80 requests each) at one request: auto 1.005× the best other policy (per
// seed 0.94–1.02); before the waiting ramp and the short probes auto stayed in plain decoding,
// 0.84×. At 2, 4 and 16 requests plain decoding is best and auto stays within its bound of it
// (0.994–1.014×).
TEST(AutoBudgetTest, FindsTheBestPolicyOnA17BShapedCpuPairWithRealisticAcceptance) {
  for (int32_t c : {1, 2, 4, 16}) {
    double automatic = 0, best = 0;
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      AutoBudget controller;
      const SimulationOptions options{.concurrency = c, .steps = 2000, .seed = seed};
      automatic += Simulate(Cpu17BRealisticPair(), {}, options, &controller).tokens_per_second;
      best += BestOtherPolicy(Cpu17BRealisticPair(), options);
    }
    EXPECT_GE(automatic, 0.97 * best) << "c " << c;
  }
}

// One request at a time on the 1.7B shape on an AMD Zen 5 (CpuZen5ShapedPair), where a quarter
// of each text's 16-token stretches are hard for the drafter: speculation pays over a text (the
// best fixed policy 1.13-1.40× plain over the seeds) but not within a hard stretch, where the
// smoothed gain falls below 1 − margin. Leaving speculation there is a pause: the request keeps its
// draft context and the probes bring it back once the stretch ends. When the switch dropped the
// draft context instead, the request decoded plainly to its end (it could be fed again only from
// its admission): auto 0.78-0.90× the best other policy per seed, 0.84× on average; now 0.80-1.07×,
// 0.95× on average (the lowest seeds: a first request too poor for the cold start to find
// speculation, which ends in plain decoding and detached contexts as before).
TEST(AutoBudgetTest, PausesThroughHardStretchesWhereSpeculationPaysOverATextAtOneRequest) {
  const SimulatedPair pair = CpuZen5ShapedPair();
  double sum = 0;
  constexpr int kSeeds = 8;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    AutoBudget controller;
    const SimulationOptions options{
        .concurrency = 1, .tokens_per_request = 256, .steps = 1000, .seed = seed};
    const double ratio =
        Simulate(pair, {}, options, &controller).tokens_per_second / BestOtherPolicy(pair, options);
    EXPECT_GE(ratio, 0.75) << "seed " << seed;
    sum += ratio;
  }
  EXPECT_GE(sum / kSeeds, 0.93);
}

// Runs as short as the bench's (four requests of 64 tokens) at one request on the 1.7B shape
// over the draft subset on the AVX2-only EPYC (CpuAvx2SubsetPair): speculation pays over a text
// (the best fixed policy about 1.45× plain), but each text opens with tokens the drafter misses
// while its predictor, noisy (its holdout R² was 0.43), scores them like the rest, so the cold
// start and the probes judge on a few poor steps. Over seeds 1-16: auto 1.11-1.53× plain and
// 0.90× the best other policy on average; before the calibration's prior kept its weight and g
// averaged a fresh start's steps, 1.08-1.52× and 0.87× (the real runs: docs/BENCHMARKS.md, "The
// auto budget on short runs").
TEST(AutoBudgetTest, ShortRunsWhoseTextsOpenHardStillSpeculateAtOneRequest) {
  const SimulatedPair pair = CpuAvx2SubsetPair();
  double sum = 0;
  constexpr int kSeeds = 16;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    AutoBudget controller;
    const SimulationOptions options{
        .concurrency = 1, .tokens_per_request = 64, .steps = 100000, .requests = 4, .seed = seed};
    const double automatic = Simulate(pair, {}, options, &controller).tokens_per_second;
    const double plain =
        Simulate(pair, {.kind = SimulatedPolicy::kPlain}, options, nullptr).tokens_per_second;
    EXPECT_GE(automatic, 1.1 * plain) << "seed " << seed;
    sum += automatic / BestOtherPolicy(pair, options);
  }
  EXPECT_GE(sum / kSeeds, 0.88);
}

// A pair on which speculation never pays at one request: drafting costs most of a plain step
// (130 ms), a verified row 30 ms more, and drafts are mostly rejected (α in [0.1, 0.3]);
// feeding a draft context costs `feed_s_per_row` a committed token.
SimulatedPair SpeculationNeverPaysPair(double feed_s_per_row) {
  SimulatedPair pair;
  pair.verify_seconds = [](int64_t rows) { return 0.1 + 0.03 * double(rows); };
  pair.draft_seconds = [](int64_t drafted) { return 0.1 * double(drafted); };
  pair.feed_seconds_per_row = feed_s_per_row;
  pair.acceptance_lo = 0.1;
  pair.acceptance_hi = 0.3;
  return pair;
}

// Drafted steps of `run` from step `from` to step `to`.
int64_t DraftedSteps(const SimulationResult& run, size_t from, size_t to) {
  int64_t drafted = 0;
  for (size_t i = from; i < std::min(to, run.steps.size()); ++i)
    drafted += run.steps[i].drafted > 0;
  return drafted;
}

// One request of 3,000 tokens where nothing speculative pays: the cold start ends in plain
// decoding. Where feeding the request's draft context costs less than half the loss budget's
// growth per plain step (0.1 ms against 2% of a 130 ms step), the request keeps it and is
// probed through its whole text, each failed probe's successor twice as sparse; where feeding
// costs more (5 ms), it drops the context at once and no step drafts again (one request: no
// admission brings a probe). Either way plain decoding's speed within the loss budget. Where the
// engine holds the plain steps' rows (a CPU backend: they join the context in one pass at the
// next probe), the dear feeding does not count and the context is kept and probed (the
// simulated loop charges the feeding row by row all the same, which drains the loss budget, so
// that run is checked for its probes only).
TEST(AutoBudgetTest, AColdStartEndingInPlainKeepsCheapDraftContextsAndProbesThemLessAndLessOften) {
  const SimulationOptions options{
      .concurrency = 1, .tokens_per_request = 3000, .steps = 100000, .requests = 1, .seed = 3};
  for (const auto& [feed_s, held] : {std::pair{0.1e-3, false}, {5e-3, false}, {5e-3, true}}) {
    const SimulatedPair pair = SpeculationNeverPaysPair(feed_s);
    AutoBudget controller({.held_draft_contexts = held});
    const SimulationResult run = Simulate(pair, {}, options, &controller);
    EXPECT_EQ(controller.mode(), AutoMode::kPlain) << "feed " << feed_s;
    const size_t first_plain = FirstPlainStep(run);
    EXPECT_LE(first_plain, 12u) << "feed " << feed_s;
    const size_t half = run.steps.size() / 2;
    if (held) {
      // Kept and probed (while the loss budget, which the loop's feeding drains, allows).
      EXPECT_GE(DraftedSteps(run, first_plain + 1, run.steps.size()), 1);
      continue;
    }
    if (feed_s < 1e-3) {
      const int64_t early = DraftedSteps(run, first_plain, half);
      const int64_t late = DraftedSteps(run, half, run.steps.size());
      EXPECT_GE(late, 1) << "still probed in the text's second half";
      EXPECT_LT(late, early) << "probes back off";
      EXPECT_LE(early + late, 60);
    } else {
      EXPECT_EQ(DraftedSteps(run, first_plain + 1, run.steps.size()), 0);
    }
    const SimulationResult plain =
        Simulate(pair, {.kind = SimulatedPolicy::kPlain}, options, nullptr);
    EXPECT_GE(run.tokens_per_second, 0.97 * plain.tokens_per_second) << "feed " << feed_s;
  }
}

// Admissions while auto decodes plainly: without held rows only a probe's admissions get a draft
// context (the first after the switch, then every second, fourth, ...: feeding the others row by
// row would cost every plain step); where the engine holds plain steps' rows every admission
// keeps one, so that speculation, once a probe shows it pays, has every running request to draft.
TEST(AutoBudgetTest, AdmissionsWhilePlainKeepDraftContextsWhereRowsAreHeld) {
  const SimulationOptions options{
      .concurrency = 1, .tokens_per_request = 400, .steps = 100000, .requests = 1, .seed = 3};
  for (const bool held : {false, true}) {
    AutoBudget controller({.held_draft_contexts = held});
    Simulate(SpeculationNeverPaysPair(0.1e-3), {}, options, &controller);
    ASSERT_EQ(controller.mode(), AutoMode::kPlain);
    std::vector<bool> fed;
    for (int i = 0; i < 8; ++i) fed.push_back(controller.FeedNewRequest());
    if (held) {
      EXPECT_EQ(fed, std::vector<bool>(8, true));
    } else {
      EXPECT_EQ(fed, (std::vector<bool>{true, false, true, false, false, false, true, false}));
    }
  }
}

// One long text at one request (1,024 tokens) where speculation pays over the text but the cold
// start may end in plain decoding: on the AVX2-only EPYC over the draft subset
// (CpuAvx2SubsetPair) the text opens with tokens the drafter misses, and an outlier step can
// cost three plain steps; on the Zen 5 (CpuZen5ShapedPair) a quarter of the text's stretches are
// hard. Feeding is counted in drafting there (the engine on the CPU measured 0.9 ms a token
// against a 186 ms plain step on that EPYC, and holds the rows between probes), so the request
// keeps its draft context and its probes find the stretches that pay. When the cold start
// dropped the context,
// the rest of the text decoded plainly: over seeds 1-16, auto 0.34-0.94× the best other policy
// over the subset (0.78× on average) and 0.55-1.00× on the Zen 5 (0.85×), 1.00-2.58× plain; now
// 0.80-0.94× (0.86×) and 1.02-1.26× (1.09×), 1.14-2.58× plain.
TEST(AutoBudgetTest, ALongTextAtOneRequestIsProbedAgainAfterAColdStartEndingInPlain) {
  constexpr int kSeeds = 16;
  for (const bool subset : {true, false}) {
    const SimulatedPair pair = subset ? CpuAvx2SubsetPair() : CpuZen5ShapedPair();
    double sum = 0;
    for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
      const SimulationOptions options{.concurrency = 1,
                                      .tokens_per_request = 1024,
                                      .steps = 100000,
                                      .requests = 1,
                                      .seed = seed};
      AutoBudget controller;
      const double automatic = Simulate(pair, {}, options, &controller).tokens_per_second;
      const double plain =
          Simulate(pair, {.kind = SimulatedPolicy::kPlain}, options, nullptr).tokens_per_second;
      EXPECT_GE(automatic, 1.1 * plain) << (subset ? "subset" : "zen 5") << ", seed " << seed;
      sum += automatic / BestOtherPolicy(pair, options);
    }
    EXPECT_GE(sum / kSeeds, subset ? 0.83 : 1.0) << (subset ? "subset" : "zen 5");
  }
}

// A verify pass carrying prompt chunks wakes most experts whatever its draft rows: priced by its
// experts, auto verifies more rows there than in a step without prompts, and while it decodes
// plainly (the experts draft rows wake cost more than the drafts return) it drafts the steps
// whose prompts woke them, where the latest drafted step's curve says that pays: not a probe, so
// the mode, the exploration's loss and the probes' schedule stay as they were.
TEST(AutoBudgetTest, PromptsInTheVerifyPassMakeDraftRowsCheapOnAMixtureOfExperts) {
  const ExpertShape shape{.experts = 128, .top_k = 8, .expert_share = 0.43};
  AutoBudget controller({.cold_start = false, .experts = shape});
  ExpertOccupancy occupancy;
  const std::vector<double> u = {8, 13.4, 22.2, 31.9, 41.8, 58, 80, 104};
  for (size_t i = 0; i < u.size(); ++i) {
    occupancy.distinct[i] = u[i];
    occupancy.count[i] = 1;
  }
  const double plain_s = 0.15;
  const auto plain_step = [&] {
    return StepSample{
        .requests = 4, .rows = 4, .verify_s = plain_s, .experts = 24, .occupancy = occupancy};
  };
  controller.Record(plain_step(), 0);
  ASSERT_NE(controller.experts(), nullptr);
  ASSERT_TRUE(controller.experts()->ready());
  const dvl::BudgetCurve curve = CurveOfSurvivals(
      4, [] { return 0.6f; }, controller.RowCosts());
  const std::vector<int32_t> prompts = {128, 96};

  ASSERT_EQ(controller.DraftCount(4, 4), 4);
  const int64_t alone = controller.ChooseRows(curve, 0, 0.01);
  ASSERT_EQ(controller.DraftCount(4, 4, prompts), 4);
  const int64_t with_prompts = controller.ChooseRows(curve, 0, 0.01);
  EXPECT_LT(alone, curve.max_rows() / 2);
  EXPECT_GT(with_prompts, 2 * alone);

  // Drafted steps at twice the memory-bound time per expert woken (the prior's t at four
  // requests, 24 experts awake) and 2 ms per draft row, their rows and experts varied apart:
  // rows whose experts cost more than the drafts return.
  const double per_expert = plain_s * (0.43 / 8) / (0.57 + 24 * 0.43 / 8);
  for (int step = 0; step < 12 && controller.mode() == AutoMode::kSpeculate; ++step) {
    controller.DraftCount(4, 4);
    controller.ChooseRows(curve, 0, 0.01);  // the step's rows are planted below
    const int64_t draft_rows = step % 2 == 0 ? 4 : 12;
    const double experts = step % 4 < 2 ? 40 : 70;
    const double verify_s = plain_s + 2 * per_expert * (experts - 24) + 2e-3 * double(draft_rows);
    controller.Record({.requests = 4,
                       .drafted = 4,
                       .rows = 4 + draft_rows,
                       .draft_s = 0.01,
                       .verify_s = verify_s,
                       .experts = experts,
                       .occupancy = occupancy},
                      std::llround(curve.At(4 + draft_rows)));
  }
  ASSERT_EQ(controller.mode(), AutoMode::kPlain);
  const AutoBudgetSnapshot before = controller.Snapshot();
  EXPECT_EQ(controller.DraftCount(4, 4), 0) << "not a probe's step";
  controller.Record(plain_step(), 0);

  ASSERT_EQ(controller.DraftCount(4, 4, prompts), 4);
  const int64_t rows = controller.ChooseRows(curve, 0, 0.01);
  EXPECT_GT(rows, 4);
  controller.Record({.requests = 4,
                     .drafted = 4,
                     .rows = rows,
                     .draft_s = 0.01,
                     .verify_s = 0.9,
                     .prompt_rows = 224,
                     .experts = 127},
                    std::llround(curve.At(rows)));
  const AutoBudgetSnapshot after = controller.Snapshot();
  EXPECT_EQ(after.mode, AutoMode::kPlain);
  EXPECT_EQ(after.prompt_steps, 1);
  EXPECT_EQ(after.explore_loss_s, before.explore_loss_s);
  EXPECT_EQ(after.gain, before.gain);
  EXPECT_EQ(controller.DraftCount(4, 4), 0) << "the probes' schedule goes on where it was";
}

// Auto pricing rows by their experts and auto pricing them by their count, against the best
// other policy, at `concurrency` requests, summed over seeds 1-4; `check` sees each seed's
// expert-priced controller after its run.
struct BothAutoBudgets {
  double automatic = 0, by_rows = 0, best = 0;
};

BothAutoBudgets RunBothAutoBudgets(const SimulatedPair& pair, int32_t concurrency,
                                   const std::function<void(uint64_t, const AutoBudget&)>& check) {
  const ExpertShape experts{.experts = 128, .top_k = 8, .expert_share = 0.43};
  BothAutoBudgets sums;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const SimulationOptions options{.concurrency = concurrency, .steps = 2000, .seed = seed};
    AutoBudget controller({.experts = experts});
    sums.automatic += Simulate(pair, {}, options, &controller).tokens_per_second;
    AutoBudget rows_only;
    sums.by_rows += Simulate(pair, {}, options, &rows_only).tokens_per_second;
    sums.best += BestOtherPolicy(pair, options);
    EXPECT_EQ(rows_only.experts(), nullptr);
    EXPECT_NE(controller.experts(), nullptr);
    if (controller.experts() != nullptr) check(seed, controller);
  }
  return sums;
}

// The bundled pair at Qwen3-30B-A3B's width (CpuA3BShapedPair): a verify step pays for the
// distinct experts its rows wake, a request's own rows share experts, drafting costs 20 ms + 25
// ms a request, so plain decoding is the best policy at 1, 4 and 16 requests. Auto pricing rows
// by their experts stays within 3% of it, as auto pricing rows by their count does; its row costs
// are what the prompts showed a request's own rows to wake (the planted law's increments).
TEST(AutoBudgetTest, PricesRowsByTheirExpertsOnAnA3BShapedCpuPair) {
  const SimulatedPair pair = CpuA3BShapedPair();
  for (int32_t c : {1, 4, 16}) {
    const BothAutoBudgets run = RunBothAutoBudgets(pair, c, [&](uint64_t, const AutoBudget& a) {
      const std::vector<double>& cost = a.experts()->row_costs();
      EXPECT_NEAR(cost[1], pair.experts.Woken({2}) - pair.experts.Woken({1}), 1e-6);
      EXPECT_NEAR(cost[9], (pair.experts.Woken({16}) - pair.experts.Woken({8})) / 8, 1e-6);
    });
    EXPECT_GE(run.automatic, 0.97 * run.best) << "c " << c;
    EXPECT_GE(run.by_rows, 0.97 * run.best) << "c " << c;
  }
}

// The same target on a CPU without matrix tiles (CpuA3BWithoutTilesPair): a verified row pays
// 11 ms of arithmetic besides the experts it wakes, and at sixteen requests the anchors already
// wake 57 of 128 experts, so a draft row adds few experts and costs mostly its arithmetic.
// Auto pricing rows by their experts fits that per-row time beside the time per expert (a time
// per expert alone, carrying the rows' arithmetic measured on steps of another mix, priced
// these steps 22-44% over), predicts them within 20%, and stays within 3% of the best policy
// at 1, 4 and 16 requests, as auto pricing rows by their count does.
TEST(AutoBudgetTest, PricesEachRowsArithmeticOnAnA3BShapedCpuWithoutMatrixTiles) {
  const SimulatedPair pair = CpuA3BWithoutTilesPair();
  const SimulatedExperts& x = pair.experts;
  // The planted time of a step of sixteen requests verifying `rows` rows each, without noise.
  const auto planted = [&](int32_t rows) {
    return x.base_s + x.per_expert_s * x.Woken(std::vector<int32_t>(16, rows)) +
           x.per_row_s * 16 * rows;
  };
  using Check = std::function<void(uint64_t, const AutoBudget&)>;
  const Check check = [&](uint64_t seed, const AutoBudget& a) {
    const ExpertCostModel& model = *a.experts();
    const std::vector<double>& cost = model.row_costs();
    for (const int32_t rows : {2, 4}) {
      const double own = std::accumulate(cost.begin(), cost.begin() + rows, 0.0);
      EXPECT_NEAR(model.VerifySeconds(16, 16.0 * (rows - 1), 16 * own, planted(1)), planted(rows),
                  0.2 * planted(rows))
          << "seed " << seed << ", " << rows << " rows a request";
    }
    EXPECT_GT(model.row_seconds(), 0.3 * x.per_row_s) << "seed " << seed;
  };
  for (int32_t c : {1, 4, 16}) {
    const BothAutoBudgets run =
        RunBothAutoBudgets(pair, c, c == 16 ? check : Check([](uint64_t, const AutoBudget&) {}));
    EXPECT_GE(run.automatic, 0.97 * run.best) << "c " << c;
    EXPECT_GE(run.by_rows, 0.97 * run.best) << "c " << c;
  }
}

// Without timing noise the first request's ramp is the figures' own: one request drafted with
// its anchor only (it measures drafting), then ten plain steps while the budget grows, then 2,
// 4, 8 rows as each fits, and the cold start ends in speculation (the fit chooses 4–7 rows).
TEST(AutoBudgetTest, ColdStartWaitsForTheBudgetWhereDraftingCostsHalfAPlainStep) {
  SimulatedPair pair = Cpu17BRealisticPair();
  pair.noise = 0;
  pair.outlier_share = 0;
  AutoBudget controller;
  const SimulationResult run =
      Simulate(pair, {}, {.concurrency = 1, .steps = 60, .seed = 1}, &controller);
  std::vector<int64_t> ramp;  // rows of the drafted steps while the cold start ran
  size_t waits = 0;
  for (const SimulatedStep& step : run.steps) {
    if (step.mode != AutoMode::kSpeculate) break;
    if (step.drafted > 0) {
      ramp.push_back(step.drafted_rows);
      if (ramp.size() == 5) break;
    } else {
      ++waits;
    }
  }
  ASSERT_EQ(ramp.size(), 5u) << "the step after the ramp drafts too";
  EXPECT_EQ(std::vector<int64_t>(ramp.begin(), ramp.begin() + 4),
            (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_GT(waits, 0u) << "the first rows step waits for the budget";
  EXPECT_LE(waits, 32u);
  EXPECT_LT(controller.Snapshot().explore_loss_s, 2 * pair.verify_seconds(1));
}

TEST(AutoBudgetTest, ProbesFindTheirWayBackWhenSpeculationStartsToPay) {
  AutoBudget controller;
  Simulate(CpuLike(), {}, {.concurrency = 16, .steps = 600, .seed = 13}, &controller);
  ASSERT_EQ(controller.mode(), AutoMode::kPlain);
  const SimulationResult later =
      Simulate(GpuLike(), {}, {.concurrency = 16, .steps = 1500, .seed = 14}, &controller);
  EXPECT_EQ(controller.mode(), AutoMode::kSpeculate);
  EXPECT_GE(MedianRowsPerDraftedRequest(later, 1200), 0.85 * 8);
}

}  // namespace
}  // namespace dscale::budget
