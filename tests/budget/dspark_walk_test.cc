#include "budget/dspark_walk.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "budget/sps_table.h"
#include "dvl/budget_allocator.h"

namespace dscale::budget {
namespace {

// Nonincreasing survival rows with a_0 = 1, ties and zeros included.
std::vector<float> RandomSurvival(std::mt19937& rng, int64_t n, int w) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> probs(static_cast<size_t>(n) * (w - 1));
  for (int64_t i = 0; i < n; ++i) {
    float p = 1;
    for (int j = 0; j < w - 1; ++j) {
      const float u = unit(rng);
      p = u < 0.15f ? 0.0f : (u < 0.35f ? p : p * unit(rng));
      probs[i * (w - 1) + j] = std::floor(p * 16) / 16;  // coarse: ties across requests
    }
  }
  std::vector<float> q(static_cast<size_t>(n) * w);
  dvl::PrefixScoresFromProbs(probs.data(), n, w, q.data());
  return q;
}

// Exhaustive: for every count b of extra verified drafts, the largest Σ a over lengths with
// Σ ℓ = b (ℓ_r drafts of request r, only positions with a > 0).
std::vector<double> BestSums(const std::vector<float>& q, int64_t n, int w) {
  std::vector<double> best(static_cast<size_t>(n * (w - 1) + 1), -1.0);
  std::vector<int> l(static_cast<size_t>(n), 0);
  while (true) {
    double sum = 0;
    int64_t b = 0;
    bool valid = true;
    for (int64_t r = 0; r < n; ++r) {
      for (int j = 1; j <= l[r]; ++j) {
        valid &= q[r * w + j] > 0;
        sum += q[r * w + j];
      }
      b += l[r];
    }
    if (valid) best[b] = std::max(best[b], sum);
    int64_t r = 0;
    while (r < n && ++l[r] == w) l[r++] = 0;
    if (r == n) break;
  }
  return best;
}

TEST(DSparkWalkTest, MatchesBruteForceIncludingTheEarlyStop) {
  std::mt19937 rng(9);
  DSparkScratch scratch;
  int stopped_early = 0, went_to_the_end = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 3);
    const int w = 2 + static_cast<int>(rng() % 4);
    const std::vector<float> q = RandomSurvival(rng, n, w);
    // SPS: smooth decreasing, or jagged (random rates), so Θ can dip and recover.
    std::vector<double> rates(static_cast<size_t>(n * w + 1));
    std::uniform_real_distribution<double> unit(0.2, 1.0);
    const bool jagged = trial % 2 == 1;
    for (size_t b = 1; b < rates.size(); ++b) {
      rates[b] = jagged ? unit(rng) : 1.0 / (1.0 + 0.3 * double(b) * unit(rng));
    }
    const auto sps = [&](int64_t b) { return rates[static_cast<size_t>(b)]; };
    std::vector<int32_t> k(static_cast<size_t>(n));
    const DSparkChoice got = DSparkWalk(q.data(), n, w, sps, &scratch, k.data());

    const std::vector<double> best = BestSums(q, n, w);
    // Θ(b) along the ranked walk is (n + best(b))·SPS(n + b): walk while it improves.
    int64_t b = 0;
    while (b + 1 < static_cast<int64_t>(best.size()) && best[b + 1] >= 0 &&
           (n + best[b + 1]) * sps(n + b + 1) > (n + best[b]) * sps(n + b)) {
      ++b;
    }
    ASSERT_EQ(got.rows, n + b) << "trial " << trial;
    ASSERT_NEAR(got.tokens, n + best[b], 1e-5) << "trial " << trial;
    double from_k = 0;
    int64_t rows = 0;
    for (int64_t r = 0; r < n; ++r) {
      ASSERT_GE(k[r], 1);
      ASSERT_LE(k[r], w);
      for (int j = 0; j < k[r]; ++j) from_k += q[r * w + j];
      rows += k[r];
    }
    ASSERT_EQ(rows, got.rows);
    ASSERT_NEAR(from_k, got.tokens, 1e-5);
    const bool more = b + 1 < static_cast<int64_t>(best.size()) && best[b + 1] >= 0;
    (more ? stopped_early : went_to_the_end)++;
  }
  EXPECT_GT(stopped_early, 100);
  EXPECT_GT(went_to_the_end, 20);
}

// DSpark's appendix example: SPS(1) = 1, SPS(2) = 0.5, a_1 = 0.8 → Θ 1.8 · 0.5 < 1: anchor only.
TEST(DSparkWalkTest, PapersCounterexampleVerifiesTheAnchorOnly) {
  const std::vector<float> q = {1.0f, 0.8f, 0.0f};
  const std::vector<double> rates = {0, 1.0, 0.5, 0.45};
  DSparkScratch scratch;
  int32_t k = 0;
  const DSparkChoice c = DSparkWalk(
      q.data(), 1, 3, [&](int64_t b) { return rates[b]; }, &scratch, &k);
  EXPECT_EQ(k, 1);
  EXPECT_DOUBLE_EQ(c.throughput, 1.0);
}

// A dip followed by a recovery: the global argmax lies past the dip, the early stop before it.
TEST(DSparkWalkTest, EarlyStopHaltsAtTheFirstDipEvenWhenLaterIsBetter) {
  const std::vector<float> q = {1.0f, 0.9f, 0.9f, 0.9f};
  const std::vector<double> rates = {0, 1.0, 0.5, 1.0, 1.0};  // Θ: 1, 0.95, 2.8, 3.7
  DSparkScratch scratch;
  int32_t k = 0;
  DSparkWalk(
      q.data(), 1, 4, [&](int64_t b) { return rates[b]; }, &scratch, &k);
  EXPECT_EQ(k, 1);
}

TEST(DSparkWalkTest, ConditionalConfidencesMultiplyBackToTheScores) {
  std::mt19937 rng(4);
  const std::vector<float> q = RandomSurvival(rng, 5, 16);
  std::vector<float> c(5 * 15);
  ConditionalConfidences(q.data(), 5, 16, c.data());
  for (int r = 0; r < 5; ++r) {
    double a = 1;
    for (int k = 1; k < 16; ++k) {
      EXPECT_GE(c[r * 15 + k - 1], 0.0f);
      EXPECT_LE(c[r * 15 + k - 1], 1.0f);
      a *= c[r * 15 + k - 1];
      EXPECT_NEAR(a, q[r * 16 + k], 1e-5);
    }
  }
}

TEST(SpsTableTest, InterpolatesStepTimeAndExtrapolatesInProportion) {
  const SpsTable t{.tokens = {1, 4, 16}, .steps_per_second = {100, 50, 25}};
  ASSERT_TRUE(t.Validate().ok());
  EXPECT_DOUBLE_EQ(t.StepsPerSecond(1), 100);
  EXPECT_DOUBLE_EQ(t.StepsPerSecond(4), 50);
  // Halfway between 4 (20 ms) and 16 (40 ms) rows: 30 ms.
  EXPECT_NEAR(t.StepsPerSecond(10), 1 / 0.030, 1e-9);
  EXPECT_DOUBLE_EQ(t.StepsPerSecond(32), 12.5);
}

TEST(SpsTableTest, SavesLoadsAndRejectsBadFilesNamingTheField) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("sps_table_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "sps.json").string();
  const SpsTable t{
      .tokens = {1, 2, 8}, .steps_per_second = {400, 300, 90.5}, .context = 64, .target = "tiny"};
  ASSERT_TRUE(SaveSpsTable(t, path).ok());
  Result<SpsTable> back = LoadSpsTable(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->tokens, t.tokens);
  EXPECT_EQ(back->steps_per_second, t.steps_per_second);
  EXPECT_EQ(back->context, 64);
  EXPECT_EQ(back->target, "tiny");

  const auto load_error = [&](const std::string& text) {
    std::ofstream(path) << text;
    Result<SpsTable> r = LoadSpsTable(path);
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_NE(load_error("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(load_error("[1]").find("expected a JSON object"), std::string::npos);
  EXPECT_NE(load_error(R"({"format": "x"})").find("format"), std::string::npos);
  EXPECT_NE(load_error(R"({"format": "dscale-sps-v1", "verify_tokens": [2, 1],
                           "steps_per_second": [1, 1]})")
                .find("verify_tokens"),
            std::string::npos);
  EXPECT_NE(load_error(R"({"format": "dscale-sps-v1", "verify_tokens": [1, 2],
                           "steps_per_second": [1]})")
                .find("steps_per_second"),
            std::string::npos);
  EXPECT_NE(load_error(R"({"format": "dscale-sps-v1", "verify_tokens": [1],
                           "steps_per_second": [-1]})")
                .find("positive"),
            std::string::npos);
  EXPECT_NE(LoadSpsTable((dir / "missing.json").string()).status().message().find("missing.json"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

// A table of the wrong types or of numbers past their range: an error naming the file and the
// field, never an exception out of the JSON library or a number wrapped into range.
TEST(SpsTableTest, WrongTypesAndRangesAreErrorsNamingTheField) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("sps_types_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "sps.json").string();
  const auto load_error = [&](const std::string& text) {
    std::ofstream(path) << text;
    Result<SpsTable> r = LoadSpsTable(path);
    return r.ok() ? std::string() : r.status().message();
  };
  const std::string good_rest = R"("verify_tokens": [1, 2], "steps_per_second": [10, 9])";
  for (const std::string format : {"5", "null", "[\"dscale-sps-v1\"]", "{\"v\": \"dscale-sps-v1\"}",
                                   "true", "\"dscale-sps-v2\""}) {
    const std::string message = load_error("{\"format\": " + format + ", " + good_rest + "}");
    EXPECT_NE(message.find(path + ": field \"format\": expected \"dscale-sps-v1\", got "),
              std::string::npos)
        << format << ": " << message;
  }
  EXPECT_NE(load_error("{" + good_rest + "}").find("field \"format\""), std::string::npos);
  const std::pair<std::string, std::string> cases[] = {
      {R"("verify_tokens": 5, "steps_per_second": [1])",
       "field \"verify_tokens\": expected an array"},
      {R"("verify_tokens": {"a": 1}, "steps_per_second": [1])",
       "field \"verify_tokens\": expected an array"},
      {R"("verify_tokens": [1], "steps_per_second": "9")",
       "field \"steps_per_second\": expected an array"},
      {R"("verify_tokens": [1, 4294967297], "steps_per_second": [1, 1])",
       "field \"verify_tokens[1]\": expected an integer in [1, 2147483648], got 4294967297"},
      {R"("verify_tokens": [18446744073709551615], "steps_per_second": [1])",
       "field \"verify_tokens[0]\""},
      {R"("verify_tokens": [2.0], "steps_per_second": [1])", "got 2.0"},
      {R"("verify_tokens": [null], "steps_per_second": [1])", "got null"},
      {R"("verify_tokens": [0], "steps_per_second": [1])", "field \"verify_tokens[0]\""},
      {R"("verify_tokens": [1], "steps_per_second": ["9"])",
       "field \"steps_per_second[0]\": expected a finite number, got \"9\""},
      {R"("verify_tokens": [1], "steps_per_second": [[9]])", "field \"steps_per_second[0]\""},
      {R"("verify_tokens": [1], "steps_per_second": [9], "context": "64")",
       "field \"context\": expected a non-negative integer"},
      {R"("verify_tokens": [1], "steps_per_second": [9], "context": 18446744073709551615)",
       "field \"context\""},
      {R"("verify_tokens": [1], "steps_per_second": [9], "context": -1)", "field \"context\""},
      {R"("verify_tokens": [1], "steps_per_second": [9], "target": 5)",
       "field \"target\": expected a string"},
      {R"("verify_tokens": [1], "verify_tokens": [1], "steps_per_second": [9])",
       "duplicate key \"verify_tokens\""},
  };
  for (const auto& [body, expected] : cases) {
    const std::string message = load_error(R"({"format": "dscale-sps-v1", )" + body + "}");
    EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << body << ": " << message;
    EXPECT_NE(message.find(expected), std::string::npos) << body << ": " << message;
  }
  // Null optional fields are absent.
  EXPECT_EQ(load_error(R"({"format": "dscale-sps-v1", )" + good_rest +
                       R"(, "context": null, "target": null})"),
            "");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dscale::budget
