// Speculative sampling with the drafter's distribution (spec/distribution_verifier.h), computed
// exactly rather than sampled. Over vocabularies of 3 and 5 ids and blocks of 2 and 3 rows,
// every draft sequence is enumerated with its probability under Q, and every uniform the rule
// reads is integrated over the cells its thresholds cut [0, 1) into (the rule's outcome is
// required constant on each cell, so the cells hold all of its thresholds). The committed tokens,
// continued by plain sampling to the block's length, must have plain sampling's law of that
// length: with temperature, top-k and top-p, drafts whose Q depends on the drafts before them
// (as a Markov head's does), a reduced draft vocabulary, Q = P, and a draft row without a
// distribution.

#include "spec/distribution_verifier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "spec/draft_distribution.h"

namespace dscale {
namespace {

// Pseudo-random logits in [-2, 2) after `prefix` (a toy model: any function of the prefix).
std::vector<float> HashLogits(const std::vector<int32_t>& prefix, int64_t n, uint64_t salt) {
  uint64_t h = PositionMix(salt);
  for (int32_t t : prefix) h = PositionMix(h + static_cast<uint64_t>(t) + 1);
  std::vector<float> out(static_cast<size_t>(n));
  for (float& v : out) {
    h = PositionMix(h);
    v = static_cast<float>(static_cast<double>(h >> 11) * 0x1.0p-53 * 4.0 - 2.0);
  }
  return out;
}

// The test's own softmax(logits / T) over the columns, scattered to target ids.
std::vector<double> Softmax(const std::vector<float>& logits, double t,
                            const std::vector<int32_t>& ids, int64_t vocab) {
  const double top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> column(logits.size());
  for (size_t c = 0; c < logits.size(); ++c) column[c] = std::exp((logits[c] - top) / t);
  const double total = std::accumulate(column.begin(), column.end(), 0.0);
  std::vector<double> q(static_cast<size_t>(vocab), 0.0);
  for (size_t c = 0; c < column.size(); ++c) q[ids.empty() ? c : ids[c]] = column[c] / total;
  return q;
}

struct Case {
  const char* name;
  int64_t vocab;
  int drafts;  // k − 1
  SamplingParams params;
  std::vector<int32_t> subset;  // the draft vocabulary; empty: the target's
  bool q_is_p = false;          // the draft rows are the target's own logits
  int no_q_row = -1;            // this draft row has a NaN (no Q): its draft is the argmax
};

// The half-open cells [0, 1) is cut into at `points` (those inside (0, 1)).
std::vector<std::pair<double, double>> Cells(std::vector<double> points) {
  points.push_back(0.0);
  points.push_back(1.0);
  std::sort(points.begin(), points.end());
  std::vector<std::pair<double, double>> cells;
  for (size_t i = 0; i + 1 < points.size(); ++i) {
    const double lo = std::clamp(points[i], 0.0, 1.0), hi = std::clamp(points[i + 1], 0.0, 1.0);
    if (hi > lo) cells.emplace_back(lo, hi);
  }
  return cells;
}

std::vector<double> CumulativeSums(const std::vector<double>& p) {
  std::vector<double> sums;
  double total = 0;
  for (double x : p) {
    if (x <= 0) continue;
    total += x;
    sums.push_back(total);
  }
  return sums;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class DistributionLaw {
 public:
  explicit DistributionLaw(const Case& c) : c_(c), k_(c.drafts + 1) {}

  // Target logits of the row after context + tokens.
  std::vector<float> TargetRow(const std::vector<int32_t>& tokens) const {
    return HashLogits(Prefixed(tokens), c_.vocab, 1);
  }
  // Draft logits of the row after context + tokens (row j of the block has tokens = d_1 .. d_j).
  std::vector<float> DraftRow(const std::vector<int32_t>& tokens) const {
    if (c_.q_is_p) return TargetRow(tokens);
    std::vector<float> row = HashLogits(Prefixed(tokens), Columns(), 2);
    if (static_cast<int>(tokens.size()) == c_.no_q_row) row[1] = std::nanf("");
    return row;
  }
  int64_t Columns() const {
    return c_.subset.empty() ? c_.vocab : static_cast<int64_t>(c_.subset.size());
  }
  std::vector<double> P(const std::vector<int32_t>& tokens) const {
    std::vector<double> p;
    TargetDistribution(TargetRow(tokens), c_.params, &p);
    return p;
  }
  // Q of the row after tokens; a row without Q proposes its argmax, one-hot.
  std::vector<double> Q(const std::vector<int32_t>& tokens) const {
    const std::vector<float> row = DraftRow(tokens);
    if (static_cast<int>(tokens.size()) == c_.no_q_row) {
      std::vector<double> q(static_cast<size_t>(c_.vocab), 0.0);
      int32_t column = 0;
      for (int32_t i = 1; i < static_cast<int32_t>(row.size()); ++i) {
        if (!std::isnan(row[i]) && (std::isnan(row[column]) || row[i] > row[column])) column = i;
      }
      q[c_.subset.empty() ? column : c_.subset[column]] = 1.0;
      return q;
    }
    return Softmax(row, c_.params.temperature, c_.subset, c_.vocab);
  }

  // Plain sampling's probability of `tokens` after the context.
  double Plain(const std::vector<int32_t>& tokens) const {
    double prob = 1.0;
    std::vector<int32_t> prefix;
    for (int32_t t : tokens) {
      prob *= P(prefix)[t];
      prefix.push_back(t);
    }
    return prob;
  }

  // Probability of each committed sequence (accepted drafts, then the next token) under the rule.
  std::map<std::vector<int32_t>, double> Committed() const {
    std::map<std::vector<int32_t>, double> law;
    std::vector<int32_t> drafts(static_cast<size_t>(c_.drafts), 0);
    const auto sequences = static_cast<int64_t>(std::pow(c_.vocab, c_.drafts));
    for (int64_t s = 0; s < sequences; ++s) {
      for (int j = c_.drafts - 1, rest = static_cast<int>(s); j >= 0; --j, rest /= c_.vocab) {
        drafts[j] = rest % static_cast<int>(c_.vocab);
      }
      double weight = 1.0;
      for (int j = 0; j < c_.drafts; ++j) {
        weight *= Q(std::vector<int32_t>(drafts.begin(), drafts.begin() + j))[drafts[j]];
      }
      if (weight > 0) AddOutcomes(drafts, weight, &law);
    }
    return law;
  }

 private:
  std::vector<int32_t> Prefixed(const std::vector<int32_t>& tokens) const {
    std::vector<int32_t> prefix = {static_cast<int32_t>(c_.vocab) - 1, 0};  // the context
    prefix.insert(prefix.end(), tokens.begin(), tokens.end());
    return prefix;
  }

  // Integrates the rule's outcome on `drafts` over its uniforms: slots 0 .. drafts − 1 are the
  // acceptance tests' (row j), slots drafts .. 2·drafts the token draws' (row j − drafts).
  void AddOutcomes(const std::vector<int32_t>& drafts, double weight,
                   std::map<std::vector<int32_t>, double>* law) const {
    std::vector<float> logits, draft_logits;
    std::vector<std::vector<std::pair<double, double>>> slots;
    std::vector<std::vector<std::pair<double, double>>> token_cells;
    for (int j = 0; j < k_; ++j) {
      const std::vector<int32_t> before(drafts.begin(), drafts.begin() + j);
      const std::vector<float> row = TargetRow(before);
      logits.insert(logits.end(), row.begin(), row.end());
      const std::vector<double> p = P(before);
      std::vector<double> points = CumulativeSums(p);
      if (j < c_.drafts) {
        const std::vector<float> draft_row = DraftRow(before);
        draft_logits.insert(draft_logits.end(), draft_row.begin(), draft_row.end());
        const std::vector<double> q = Q(before);
        const int32_t d = drafts[j];
        slots.push_back(Cells({std::min(1.0, p[d] / q[d])}));
        std::vector<double> residual(p.size());
        for (size_t x = 0; x < p.size(); ++x) residual[x] = std::max(0.0, p[x] - q[x]);
        const double mass = std::accumulate(residual.begin(), residual.end(), 0.0);
        if (mass > 0) {
          for (double& r : residual) r /= mass;
          for (double point : CumulativeSums(residual)) points.push_back(point);
        }
      }
      token_cells.push_back(Cells(points));
    }
    for (auto& cells : token_cells) slots.push_back(std::move(cells));
    const DraftRows rows{.logits = draft_logits, .columns = Columns(), .column_ids = c_.subset};
    DistributionScratch scratch;
    std::vector<size_t> at(slots.size(), 0);
    for (;;) {
      double cell_weight = weight;
      for (size_t s = 0; s < slots.size(); ++s) {
        cell_weight *= slots[s][at[s]].second - slots[s][at[s]].first;
      }
      VerifyResult outcome[3];
      for (int where = 0; where < 3; ++where) {  // just inside the low end, middle, high end
        const double f = where == 0 ? 1e-9 : where == 1 ? 0.5 : 1 - 1e-9;
        const auto uniform = [&](UniformStream stream, int64_t position) {
          EXPECT_NE(stream, UniformStream::kDraft) << "verification never reads the draft stream";
          const int64_t j = position - kFirstPosition;
          const size_t s = stream == UniformStream::kAccept ? j : c_.drafts + j;
          const auto [lo, hi] = slots[s][at[s]];
          return std::min(lo + f * (hi - lo), kBelowOne);  // a uniform is never 1
        };
        outcome[where] = VerifyWithDraftDistribution(logits, c_.vocab, drafts, rows, c_.params,
                                                     kFirstPosition, uniform, &scratch)
                             .value();
      }
      for (int where : {0, 2}) {
        ASSERT_EQ(outcome[where].accepted, outcome[1].accepted) << "outcome not constant on a cell";
        ASSERT_EQ(outcome[where].next_token, outcome[1].next_token);
      }
      std::vector<int32_t> committed(drafts.begin(), drafts.begin() + outcome[1].accepted);
      if (outcome[1].accepted < c_.drafts) {
        ASSERT_NE(outcome[1].next_token, drafts[outcome[1].accepted]) << "a rejected draft returned";
      }
      committed.push_back(outcome[1].next_token);
      (*law)[committed] += cell_weight;
      size_t s = 0;
      while (s < slots.size() && ++at[s] == slots[s].size()) at[s++] = 0;
      if (s == slots.size()) break;
    }
  }

  static constexpr int64_t kFirstPosition = 9;
  static constexpr double kBelowOne = 1.0 - 0x1.0p-53;
  Case c_;
  int k_;
};

class DistributionVerifierLawTest : public ::testing::TestWithParam<Case> {};

// The committed tokens, continued by plain sampling to k tokens, have plain sampling's law.
TEST_P(DistributionVerifierLawTest, CommittedTokensHavePlainSamplingsLaw) {
  const Case& c = GetParam();
  const DistributionLaw model(c);
  const std::map<std::vector<int32_t>, double> committed = model.Committed();
  const int k = c.drafts + 1;
  const auto sequences = static_cast<int64_t>(std::pow(c.vocab, k));
  double total = 0;
  for (int64_t s = 0; s < sequences; ++s) {
    std::vector<int32_t> y(static_cast<size_t>(k));
    for (int i = k - 1, rest = static_cast<int>(s); i >= 0; --i, rest /= c.vocab) {
      y[i] = rest % static_cast<int>(c.vocab);
    }
    const double plain = model.Plain(y);
    double rule = 0;
    for (const auto& [tokens, prob] : committed) {
      if (!std::equal(tokens.begin(), tokens.end(), y.begin())) continue;
      // Plain sampling's continuation of the committed tokens to y.
      double rest = 1.0;
      std::vector<int32_t> prefix = tokens;
      for (size_t i = tokens.size(); i < y.size(); ++i) {
        rest *= model.P(prefix)[y[i]];
        prefix.push_back(y[i]);
      }
      rule += prob * rest;
    }
    total += rule;
    EXPECT_NEAR(rule, plain, 1e-12) << "tokens " << s;
  }
  EXPECT_NEAR(total, 1.0, 1e-12);
  if (c.q_is_p) {
    for (const auto& [tokens, prob] : committed) {
      EXPECT_EQ(tokens.size(), static_cast<size_t>(k)) << "Q = P accepts every draft";
    }
  }
}

// A draft is accepted with probability Σ min(P, Q) — the argmax rule's P(argmax Q) at most.
TEST_P(DistributionVerifierLawTest, OneRowAcceptsWithTheOverlapOfPAndQ) {
  Case c = GetParam();
  c.drafts = 1;
  const DistributionLaw model(c);
  double accepted = 0;
  for (const auto& [tokens, prob] : model.Committed()) {
    if (tokens.size() == 2) accepted += prob;
  }
  const std::vector<double> p = model.P({}), q = model.Q({});
  double overlap = 0;
  for (size_t x = 0; x < p.size(); ++x) overlap += std::min(p[x], q[x]);
  EXPECT_NEAR(accepted, overlap, 1e-12);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, DistributionVerifierLawTest,
    ::testing::Values(
        Case{"v3_two_drafts", 3, 2, {.temperature = 1.0f}},
        Case{"v5_two_drafts", 5, 2, {.temperature = 1.0f}},
        Case{"v5_one_draft_cold", 5, 1, {.temperature = 0.4f}},
        Case{"v5_top_k", 5, 2, {.temperature = 0.7f, .top_k = 2}},
        Case{"v5_top_p", 5, 2, {.temperature = 1.3f, .top_p = 0.6f}},
        Case{"v3_top_k_top_p", 3, 2, {.temperature = 0.9f, .top_k = 2, .top_p = 0.8f}},
        Case{"v5_subset", 5, 2, {.temperature = 1.0f}, {0, 2, 3}},
        Case{"v5_subset_top_p", 5, 2, {.temperature = 1.5f, .top_p = 0.7f}, {1, 4}},
        Case{"v3_q_is_p", 3, 2, {.temperature = 1.0f}, {}, /*q_is_p=*/true},
        Case{"v5_q_is_p", 5, 2, {.temperature = 0.8f}, {}, /*q_is_p=*/true},
        Case{"v5_row_without_q", 5, 2, {.temperature = 1.0f}, {}, false, /*no_q_row=*/1}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// The drafter's draw: SampleDraftColumn takes column c on a set of uniforms of measure Q(c),
// never a column whose probability underflowed to 0, and a row without Q gives its argmax.
TEST(SampleDraftColumnTest, DrawsEachColumnWithItsProbability) {
  const std::vector<float> logits = {0.3f, -1.1f, 2.0f, -20000.0f, 0.9f};
  for (const float t : {0.5f, 1.0f, 2.5f}) {
    const std::vector<double> q = Softmax(logits, t, {}, 5);
    ASSERT_EQ(q[3], 0.0);
    std::vector<double> mass(5, 0.0), scratch;
    for (const auto& [lo, hi] : Cells(CumulativeSums(q))) {
      const int32_t c = SampleDraftColumn(logits, t, 0.5 * (lo + hi), &scratch);
      ASSERT_EQ(SampleDraftColumn(logits, t, lo + 1e-9 * (hi - lo), &scratch), c);
      ASSERT_EQ(SampleDraftColumn(logits, t, hi - 1e-9 * (hi - lo), &scratch), c);
      mass[c] += hi - lo;
    }
    for (size_t c = 0; c < 5; ++c) EXPECT_NEAR(mass[c], q[c], 1e-12) << "column " << c;
    std::vector<double> made;
    ASSERT_TRUE(DraftColumnDistribution(logits, t, &made));
    for (size_t c = 0; c < 5; ++c) EXPECT_NEAR(made[c], q[c], 1e-15);
  }
  std::vector<float> no_q = logits;
  no_q[0] = std::numeric_limits<float>::infinity();
  std::vector<double> scratch;
  EXPECT_FALSE(DraftColumnDistribution(no_q, 1.0f, &scratch));
  int32_t argmax = 0;
  for (int32_t c = 1; c < 5; ++c) argmax = no_q[c] > no_q[argmax] ? c : argmax;
  EXPECT_EQ(SampleDraftColumn(no_q, 1.0f, 0.7, &scratch), argmax);
}

// A draft the drafter could not have drawn (probability 0 under Q: outside the draft
// vocabulary) is a bug in the caller.
TEST(DistributionVerifierDeathTest, ADraftOfZeroDraftProbabilityIsABug) {
  const std::vector<float> logits = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};  // two rows, vocab 3
  const std::vector<float> draft_logits = {1.0f, 2.0f};
  const std::vector<int32_t> subset = {0, 2};
  const DraftRows rows{.logits = draft_logits, .columns = 2, .column_ids = subset};
  DistributionScratch scratch;
  EXPECT_DEATH(static_cast<void>(VerifyWithDraftDistributionAt(
                   logits, 3, std::vector<int32_t>{1}, rows, {.temperature = 1.0f}, 4, 0, &scratch)),
               "positive draft probability");
}

// The engine's form reads StreamUniform(seed, position, ·): the token stream is plain
// sampling's, so with no drafts it emits plain sampling's token.
TEST(DistributionVerifierTest, SeededFormDrawsFromTheStreamsAtEachPosition) {
  const std::vector<float> logits = {0.3f, 1.2f, -0.4f, 0.9f, 0.0f,    // row 0
                                     1.0f, -1.0f, 0.2f, 0.4f, 0.8f};   // row 1
  const std::vector<float> draft_logits = {0.5f, 0.1f, 1.5f, -0.3f, 0.2f};
  const SamplingParams params{.temperature = 0.9f, .top_k = 4};
  const DraftRows rows{.logits = draft_logits, .columns = 5};
  DistributionScratch scratch;
  std::vector<double> p;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const VerifyResult none =
        VerifyWithDraftDistributionAt(std::span(logits).first(5), 5, {}, rows, params, seed, 30,
                                      &scratch)
            .value();
    TargetDistribution(std::span(logits).first(5), params, &p);
    EXPECT_EQ(none.accepted, 0);
    EXPECT_EQ(none.next_token, SampleIndex(p, PositionUniform(seed, 30)));
    const std::vector<int32_t> drafts = {SampleDraftColumn(
        draft_logits, params.temperature, StreamUniform(seed, 30, UniformStream::kDraft), &p)};
    const auto source = [seed](UniformStream stream, int64_t position) {
      return StreamUniform(seed, position, stream);
    };
    const VerifyResult a =
        VerifyWithDraftDistributionAt(logits, 5, drafts, rows, params, seed, 30, &scratch).value();
    const VerifyResult b =
        VerifyWithDraftDistribution(logits, 5, drafts, rows, params, 30, source, &scratch).value();
    EXPECT_EQ(a.accepted, b.accepted);
    EXPECT_EQ(a.next_token, b.next_token);
  }
}

TEST(StreamUniformTest, StreamsArePureIndependentLookingFunctions) {
  EXPECT_EQ(StreamUniform(7, 3, UniformStream::kToken), PositionUniform(7, 3));
  EXPECT_EQ(StreamUniform(7, 3, UniformStream::kDraft), StreamUniform(7, 3, UniformStream::kDraft));
  double sum[3] = {0, 0, 0}, product = 0;
  const UniformStream streams[3] = {UniformStream::kToken, UniformStream::kDraft,
                                    UniformStream::kAccept};
  const int n = 100000;
  for (int64_t p = 0; p < n; ++p) {
    double u[3];
    for (int s = 0; s < 3; ++s) {
      u[s] = StreamUniform(11, p, streams[s]);
      ASSERT_GE(u[s], 0.0);
      ASSERT_LT(u[s], 1.0);
      sum[s] += u[s];
    }
    ASSERT_NE(u[0], u[1]);
    ASSERT_NE(u[1], u[2]);
    product += (u[1] - 0.5) * (u[2] - 0.5);
  }
  for (double s : sum) EXPECT_NEAR(s / n, 0.5, 0.005);
  EXPECT_NEAR(product / n, 0.0, 0.003);  // the draft and acceptance streams uncorrelated
}

TEST(DraftSamplingTest, ParsesTheTwoModesByName) {
  EXPECT_EQ(ParseDraftSampling("argmax").value(), DraftSampling::kArgmax);
  EXPECT_EQ(ParseDraftSampling("distribution").value(), DraftSampling::kDistribution);
  const Status bad = ParseDraftSampling("sample").status();
  EXPECT_NE(bad.message().find("--draft-sampling"), std::string::npos);
  EXPECT_EQ(DraftSamplingName(DraftSampling::kDistribution), "distribution");
}

}  // namespace
}  // namespace dscale
