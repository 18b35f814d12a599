// The expert cost model (budget/expert_cost_model.h): the experts' share of a step's weight
// bytes from a config's parameter counts, a request's row costs from the experts its spans' first
// rows woke (and the prior without them), the predicted experts and verify time of a step not
// yet run, and σ, ρ and the per-row seconds r learned from the drafted steps that were.

#include "budget/expert_cost_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "model/random_checkpoint.h"

namespace dscale::budget {
namespace {

constexpr int kWidth = 16;

ExpertShape A3BLike() { return {.experts = 128, .top_k = 8, .expert_share = 0.43}; }

// Occupancy whose m-row points are `u` (m = 1, 2, 4, … 256), one span each.
ExpertOccupancy Occupancy(const std::vector<double>& u) {
  ExpertOccupancy o;
  for (size_t i = 0; i < u.size(); ++i) {
    o.distinct[i] = u[i];
    o.count[i] = 1;
  }
  return o;
}

// TinyQwen3MoeConfig: hidden 128, vocab 512, 4 layers of 4 query heads over 2 KV heads of 32,
// 8 experts of 64, top 2, untied: per layer the attention's q, k, v and o (128 + 64 + 64 + 128
// rows of 128) and the router (8 rows), k = 2 experts of 3 · 64 rows; the LM head's 512 rows.
TEST(ExpertCostModelTest, TheExpertsShareComesFromTheParameterCounts) {
  const ExpertShape shape = ExpertShapeOf(TinyQwen3MoeConfig());
  EXPECT_EQ(shape.experts, 8);
  EXPECT_EQ(shape.top_k, 2);
  const double attention = (128 + 2 * 64 + 128) * 128.0, router = 8 * 128.0;
  const double experts = 4 * 2 * 3 * 64 * 128.0, dense = 4 * (attention + router) + 512 * 128.0;
  EXPECT_DOUBLE_EQ(shape.expert_share, experts / (dense + experts));
  EXPECT_FALSE(ExpertShapeOf(TinyQwen3Config()).sparse());
  // Qwen3.5-MoE: the shared expert and its gate count with the dense bytes.
  const ExpertShape hybrid = ExpertShapeOf(TinyQwen3_5MoeConfig());
  EXPECT_TRUE(hybrid.sparse());
  EXPECT_LT(hybrid.expert_share, shape.expert_share);
}

TEST(ExpertCostModelTest, RowCostsFollowWhatARequestsOwnRowsWake) {
  ExpertCostModel model(A3BLike(), kWidth, 16);
  // No occupancy yet: every row k new experts (rows assumed independent, the dearest case).
  EXPECT_EQ(model.row_costs()[0], 0.0);
  for (int j = 1; j < kWidth; ++j) EXPECT_EQ(model.row_costs()[static_cast<size_t>(j)], 8.0) << j;
  // The A3B measurements at one request: 8, 13.4, 22.2, 31.9, 41.8 experts for 1-16 rows.
  model.AddOccupancy(Occupancy({8, 13.4, 22.2, 31.9, 41.8}));
  const std::vector<double>& c = model.row_costs();
  EXPECT_NEAR(c[1], 5.4, 1e-9);
  EXPECT_NEAR(c[2], 4.4, 1e-9);
  EXPECT_NEAR(c[3], 4.4, 1e-9);
  EXPECT_NEAR(c[5], 9.7 / 4, 1e-9);
  EXPECT_NEAR(c[12], 9.9 / 8, 1e-9);
  EXPECT_NEAR(std::accumulate(c.begin(), c.end(), 0.0), 41.8 - 8, 1e-9);
  // A long stretch of steps verifying one or two rows a request moves the short points only:
  // the long ones keep what longer spans showed.
  for (int step = 0; step < 200; ++step) model.AddOccupancy(Occupancy({8, 12.4}));
  EXPECT_NEAR(model.row_costs()[1], 12.4 - 8, 0.01);
  EXPECT_NEAR(model.row_costs()[12], 9.9 / 8, 1e-9);
  // Only short spans seen: past them the last increment per row goes on.
  ExpertCostModel short_spans(A3BLike(), kWidth, 16);
  short_spans.AddOccupancy(Occupancy({8, 13.4}));
  EXPECT_NEAR(short_spans.row_costs()[9], 5.4, 1e-9);
}

TEST(ExpertCostModelTest, PredictsAStepFromItsAnchorsAndItsDraftRows) {
  ExpertCostModel model(A3BLike(), kWidth, 16);
  EXPECT_FALSE(model.ready());
  model.AddStep(4, /*draft_rows=*/0, /*cost=*/0, /*experts=*/24, /*verify_s=*/0.125,
                /*plain_s=*/0.125);
  ASSERT_TRUE(model.ready());
  EXPECT_EQ(model.AnchorExperts(4), 24);
  // At an N not seen, the nearest N seen with its anchors' experts landing as at random: five
  // anchors leave (1 − 24/128)^(5/4) of the experts asleep.
  EXPECT_NEAR(model.AnchorExperts(5), 128 * (1 - std::pow(1 - 24.0 / 128, 5.0 / 4)), 1e-9);
  // Draft rows adding 20 experts to their requests' own: those landing on the 104 asleep, each
  // at random, (128 − 24) · (1 − exp(−20/128)); about the asleep share (1 − 24/128) of them.
  const double added = 104 * (1 - std::exp(-20.0 / 128));
  EXPECT_DOUBLE_EQ(model.Experts(4, 20), 24 + added);
  EXPECT_NEAR(added, 20 * (1 - 24.0 / 128), 1.5);
  EXPECT_NEAR(model.Experts(4, 0.01), 24 + 0.01 * (1 - 24.0 / 128), 1e-6);
  const double per_expert = 0.125 * (0.43 / 8) / (0.57 + 24 * 0.43 / 8);
  EXPECT_DOUBLE_EQ(model.SecondsPerExpert(4, 0.125), per_expert);
  EXPECT_DOUBLE_EQ(model.VerifySeconds(4, 6, 20, 0.125), 0.125 + per_expert * added);
  EXPECT_EQ(model.VerifySeconds(4, 0, 0, 0.125), 0.125);
  EXPECT_NEAR(model.Experts(4, 1e6), 128, 1e-9);  // at most every expert
}

// Under requests arriving over time the plain steps seen may all be at one or two requests while
// the drafted ones run at many: the anchors' experts there follow the growth the seen N show
// (ln(1 − X/E) as N^γ), not the nearest N's. The A3B-width pair's anchors woke 8 at one request,
// 14.4 at two and about 43 at nine.
TEST(ExpertCostModelTest, AnchorsAtAnUnseenRequestCountGrowAsTheSeenOnesDo) {
  ExpertCostModel model(A3BLike(), kWidth, 16);
  model.AddStep(1, 0, 0, /*experts=*/8, 0.09, 0.09);
  model.AddStep(2, 0, 0, /*experts=*/14.4, 0.105, 0.105);
  const double l1 = -std::log(1 - 8.0 / 128), l2 = -std::log(1 - 14.4 / 128);
  const double gamma = std::log(l2 / l1) / std::log(2.0);
  EXPECT_NEAR(gamma, 0.88, 0.01);  // other requests' anchors share experts beyond chance
  const double nine = model.AnchorExperts(9);
  EXPECT_NEAR(nine, 128 * (1 - std::exp(-l2 * std::pow(4.5, gamma))), 1e-9);
  EXPECT_NEAR(nine, 43, 0.1 * 43);
  EXPECT_EQ(model.AnchorExperts(2), 14.4);  // a seen N as seen
  // More requests never wake fewer experts, and never more than E.
  for (int n = 1; n < 16; ++n) EXPECT_LT(model.AnchorExperts(n), model.AnchorExperts(n + 1));
  EXPECT_LT(model.AnchorExperts(16), 128);
  // Every expert awake at one N seen (a long prompt's worth of anchors): still finite and at most
  // E.
  ExpertCostModel saturated(A3BLike(), kWidth, 16);
  saturated.AddStep(12, 0, 0, /*experts=*/128, 0.4, 0.4);
  EXPECT_LE(saturated.AnchorExperts(14), 128);
  EXPECT_GT(saturated.AnchorExperts(6), 100);
}

// Prompt chunks riding in the verify pass wake u(P) each (the points measured up to 64 rows, the
// slope past them), independently of each other and of the anchors; draft rows then add only
// the share of their experts still asleep, and the prompts' own time is not the draft rows'.
TEST(ExpertCostModelTest, DraftRowsInAPassWithPromptsPayForTheExpertsStillAsleep) {
  ExpertCostModel model(A3BLike(), kWidth, 16);
  model.AddOccupancy(Occupancy({8, 13.4, 22.2, 31.9, 41.8, 58, 80}));
  EXPECT_NEAR(model.SpanExperts(16), 41.8, 1e-9);
  EXPECT_NEAR(model.SpanExperts(48), 69, 1e-9);
  EXPECT_NEAR(model.SpanExperts(96), 80 + 22.0 / 32 * 32, 1e-9);  // the last slope goes on
  EXPECT_EQ(model.SpanExperts(1000), 128);
  // Row costs still come from the points up to W.
  EXPECT_NEAR(model.row_costs()[12], 9.9 / 8, 1e-9);
  const std::vector<int32_t> one = {48}, two = {48, 48};
  EXPECT_NEAR(model.PromptExperts(one), 69, 1e-9);
  EXPECT_NEAR(model.PromptExperts(two), 128 * (1 - (59.0 / 128) * (59.0 / 128)), 1e-9);

  const double plain_s = 0.125;
  model.AddStep(4, 0, 0, 24, plain_s, plain_s);
  const double prompts = model.PromptExperts(two);
  const double awake = 128 - (128 - 24) * (1 - prompts / 128);
  EXPECT_NEAR(model.AwakeExperts(4, prompts), awake, 1e-9);
  EXPECT_EQ(model.AwakeExperts(4), 24);
  const double added = (128 - awake) * (1 - std::exp(-20.0 / 128));
  EXPECT_NEAR(model.Experts(4, 20, prompts), awake + added, 1e-9);
  const double per_expert = model.SecondsPerExpert(4, plain_s);
  EXPECT_NEAR(model.VerifySeconds(4, 6, 20, plain_s, prompts), plain_s + per_expert * added, 1e-12);
  EXPECT_LT(model.VerifySeconds(4, 6, 20, plain_s, prompts),
            model.VerifySeconds(4, 6, 20, plain_s));
  // Prompts that wake every expert leave the draft rows their arithmetic alone.
  EXPECT_EQ(model.VerifySeconds(4, 6, 20, plain_s, 128), plain_s);
}

TEST(ExpertCostModelTest, LearnsSharingFromDraftedSteps) {
  ExpertCostModel model(A3BLike(), kWidth, 16);
  model.AddStep(4, 0, 0, 24, 0.125, 0.125);
  // Draft rows of 20 own experts woke 13 of the 104 asleep: σ solves
  // 104 · (1 − exp(−σ · 20/128)) = 13, and the model then predicts that step.
  model.AddStep(4, 6, 20, 24 + 13, 0.2, 0.125);
  const double sigma = -128.0 / 20 * std::log(1 - 13.0 / 104);
  EXPECT_NEAR(model.sharing(), sigma, 1e-9);
  EXPECT_NEAR(model.Experts(4, 20), 24 + 13, 1e-9);
  // Later steps move it by a quarter of the way: σ = 1 woke 104 · (1 − exp(−20/128)).
  model.AddStep(4, 6, 20, 24 + 104 * (1 - std::exp(-20.0 / 128)), 0.2, 0.125);
  EXPECT_NEAR(model.sharing(), 0.75 * sigma + 0.25, 1e-9);
  // Drafts that woke every expert asleep: σ at its bound.
  model.AddStep(4, 6, 20, 128, 0.2, 0.125);
  EXPECT_NEAR(model.sharing(), 0.75 * (0.75 * sigma + 0.25) + 0.25 * 2, 1e-9);
}

// Steps planted with twice the memory-bound prior per expert (ρ = 2) and 3 ms of arithmetic per
// draft row: rows and the experts they add vary apart (a few rows waking many experts at low
// concurrency, many rows on experts already awake at high), so the fit finds both, within the
// priors' 5% pull, and predicts a step of another shape.
TEST(ExpertCostModelTest, FitsTimePerExpertAndPerRowTogether) {
  ExpertCostModel model(A3BLike(), kWidth, 16);
  const double plain_s = 0.125;
  model.AddStep(4, 0, 0, 24, plain_s, plain_s);
  const double per_expert = model.SecondsPerExpert(4, plain_s);
  EXPECT_EQ(model.row_seconds(), 0.0);
  const auto planted = [&](double rows, double added) {
    return plain_s + 2 * per_expert * added + 3e-3 * rows;
  };
  struct Step {
    int64_t rows;
    double added;
  };
  for (int round = 0; round < 3; ++round) {
    for (const Step s : {Step{2, 10}, Step{12, 14}, Step{24, 6}, Step{6, 20}, Step{40, 2}}) {
      model.AddStep(4, s.rows, 16, 24 + s.added, planted(double(s.rows), s.added), plain_s);
    }
  }
  EXPECT_NEAR(model.time_ratio(), 2.0, 0.1);
  EXPECT_NEAR(model.row_seconds(), 3e-3, 0.15e-3);
  // 30 rows whose predicted cost adds σ · C · (1 − 24/128) experts.
  const double added = model.Experts(4, 24) - 24;
  EXPECT_NEAR(model.VerifySeconds(4, 30, 24, plain_s), planted(30, added),
              0.03 * planted(30, added));
}

// One drafted step cannot tell its experts from its rows: the excess over the memory-bound prior
// goes half to each, so that step is predicted at its own time (less the priors' pull), and a
// step that woke no expert past the anchors prices its rows alone.
TEST(ExpertCostModelTest, SplitsWhatOneStepCannotTellApart) {
  ExpertCostModel model(A3BLike(), kWidth, 16);
  const double plain_s = 0.125;
  model.AddStep(4, 0, 0, 24, plain_s, plain_s);
  const double per_expert = model.SecondsPerExpert(4, plain_s);
  const double prior = per_expert * 13, excess = 0.03;
  model.AddStep(4, 6, 16, 24 + 13, plain_s + prior + excess, plain_s);
  EXPECT_NEAR(model.time_ratio() * prior - prior, model.row_seconds() * 6, 1e-9);
  EXPECT_NEAR(model.row_seconds() * 6, excess / 2.05, 1e-9);

  ExpertCostModel saturated(A3BLike(), kWidth, 16);
  saturated.AddStep(16, 0, 0, 120, plain_s, plain_s);
  saturated.AddStep(16, 20, 16, 120, plain_s + 0.04, plain_s);
  EXPECT_EQ(saturated.time_ratio(), 1.0);
  EXPECT_NEAR(saturated.row_seconds(), 0.04 / 20 / 1.05, 1e-12);
  // A step cheaper than the prior: no negative row cost, ρ below 1.
  ExpertCostModel cheap(A3BLike(), kWidth, 16);
  cheap.AddStep(4, 0, 0, 24, plain_s, plain_s);
  cheap.AddStep(4, 6, 16, 24 + 13, plain_s + 0.5 * prior, plain_s);
  EXPECT_EQ(cheap.row_seconds(), 0.0);
  EXPECT_LT(cheap.time_ratio(), 1.0);
  EXPECT_GE(cheap.time_ratio(), 0.25);
}

}  // namespace
}  // namespace dscale::budget
