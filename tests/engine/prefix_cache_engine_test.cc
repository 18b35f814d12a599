// Prefix caching through the engine: requests whose prompts share starts (system prompts, a
// conversation's earlier turns, prompts equal but for the last token) reuse the pages earlier
// requests wrote, and the outputs are those of the engine without the cache, in every mode,
// also when the cache is small enough that cached pages are evicted all the time; on a hybrid
// target with the recurrent states kept after some pages, bit for bit in every log-probability.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "model/random_checkpoint.h"
#include "planted_drafter.h"

namespace dscale {
namespace {

using testing::EngineRun;
using testing::RunPrompts;

using PrefixCacheEngineTest = testing::EngineFixture;

// 24 prompts from three shared starts of 37 tokens: a different tail each, or the tail of
// another prompt with only its last token changed, or a whole earlier prompt and more.
std::vector<std::vector<int32_t>> SharedPrefixPrompts(int64_t vocab) {
  std::mt19937 rng(29);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab) - 4);
  const auto random_tokens = [&](int n) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back(token(rng));
    return t;
  };
  const std::vector<std::vector<int32_t>> starts = {random_tokens(37), random_tokens(37),
                                                    random_tokens(37)};
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 24; ++i) {
    std::vector<int32_t> p = starts[i % 3];
    if (i >= 3 && i % 4 == 0) {
      p = prompts[i - 3];  // the same prompt but its last token
      p.back() = (p.back() + 1) % static_cast<int32_t>(vocab - 3);
    } else if (i >= 3 && i % 4 == 1) {
      p = prompts[i - 3];  // an earlier prompt continued
      const std::vector<int32_t> more = random_tokens(9);
      p.insert(p.end(), more.begin(), more.end());
    } else {
      const std::vector<int32_t> tail = random_tokens(3 + i % 11);
      p.insert(p.end(), tail.begin(), tail.end());
    }
    prompts.push_back(std::move(p));
  }
  return prompts;
}

TEST_F(PrefixCacheEngineTest, GreedyOutputsEqualTheUncachedEngineInEveryModeAndUnderEviction) {
  const auto prompts = SharedPrefixPrompts(target_.config().vocab_size);
  testing::PlantedDrafter planted(target_, 16, /*salt=*/13);
  const GenerationParams params{.max_tokens = 12};
  for (const char* mode : {"none", "dflash", "fixed:4", "dscale"}) {
    Drafter* drafter = std::string(mode) == "none" ? nullptr : &planted;
    // A cache for all of them, and one for four requests at a time (cached pages are evicted
    // whenever new requests need their room).
    for (const int64_t kv_tokens : {int64_t{1} << 14, int64_t{4} * 96}) {
      EngineConfig config{.policy = LengthPolicy::Parse(mode).value(),
                          .max_running = 4,
                          .kv_tokens = kv_tokens,
                          .inputs = {.predictor = &predictor_}};
      const EngineRun plain = RunPrompts(target_, drafter, config, prompts, params);
      config.prefix_cache = true;
      const EngineRun cached = RunPrompts(target_, drafter, config, prompts, params);
      const std::string what = std::string(mode) + " kv_tokens=" + std::to_string(kv_tokens);
      EXPECT_EQ(testing::FirstDifference(cached.outputs, plain.outputs), "") << what;
      EXPECT_EQ(plain.stats.prefix_hit_tokens, 0) << what;
      EXPECT_GE(cached.stats.prefix_hit_tokens, 16 * 20) << what;  // most prompts reuse a page
      EXPECT_EQ(cached.stats.prefill_rows + cached.stats.prefix_hit_tokens,
                plain.stats.prefill_rows)
          << what;
      EXPECT_EQ(cached.free_pages_after, cached.total_pages) << what;
    }
  }
}

// n choices of one prompt arrive together: the first computes the prompt's pages, the others wait
// for them and reuse them (without the wait all four would be admitted at once and prefill the
// same 53 rows each).
TEST_F(PrefixCacheEngineTest, ChoicesOfOnePromptSubmittedTogetherShareItsPages) {
  std::mt19937 rng(41);
  std::uniform_int_distribution<int32_t> token(
      0, static_cast<int32_t>(target_.config().vocab_size) - 4);
  std::vector<int32_t> prompt(53);
  for (int32_t& t : prompt) t = token(rng);
  const std::vector<std::vector<int32_t>> prompts(4, prompt);
  testing::PlantedDrafter planted(target_, 16, /*salt=*/5);
  for (const char* mode : {"none", "dflash"}) {
    Drafter* drafter = std::string(mode) == "none" ? nullptr : &planted;
    EngineConfig config{.policy = LengthPolicy::Parse(mode).value(), .max_running = 4};
    const EngineRun plain = RunPrompts(target_, drafter, config, prompts, {.max_tokens = 8});
    config.prefix_cache = true;
    const EngineRun cached = RunPrompts(target_, drafter, config, prompts, {.max_tokens = 8});
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(testing::FirstDifference(cached.outputs[i], plain.outputs[i]), "") << mode;
    }
    // Three later choices reuse the (53 − 1) / 16 = 3 full pages and compute the last 5 rows.
    EXPECT_EQ(cached.stats.prefix_hit_tokens, 3 * 48) << mode;
    EXPECT_EQ(cached.stats.prefill_rows, 53 + 3 * 5) << mode;
    EXPECT_EQ(plain.stats.prefill_rows, 4 * 53) << mode;
    EXPECT_EQ(cached.free_pages_after, cached.total_pages) << mode;
  }
}

// The drafter's context rows come from the cache with the target's: a real DFlash drafter, whose
// drafts read them, drafts what it drafts without the cache. One request at a time, so the steps
// of both runs line up; the draft logits are compared (their K/V came from prefills of different
// chunks, so they agree within float noise, not bit for bit).
TEST_F(PrefixCacheEngineTest, TheDrafterReadsTheCachedContextRows) {
  const auto prompts = SharedPrefixPrompts(target_.config().vocab_size);
  std::unique_ptr<DFlashDrafter> dflash = testing::RandomDrafter(target_, 9);
  const auto run = [&](bool prefix_cache) {
    std::vector<std::vector<float>> logits;
    EngineConfig config{.policy = LengthPolicy::Parse("dflash").value(),
                        .max_running = 1,
                        .prefix_cache = prefix_cache};
    config.on_step = [&](const StepRecord& step) {
      if (step.drafts != nullptr) logits.push_back(step.drafts->logits);
    };
    const EngineRun done = RunPrompts(target_, dflash.get(), config, prompts, {.max_tokens = 6});
    EXPECT_EQ(done.stats.prefix_hit_tokens > 0, prefix_cache);
    return logits;
  };
  const std::vector<std::vector<float>> plain = run(false), cached = run(true);
  ASSERT_EQ(plain.size(), cached.size());
  ASSERT_FALSE(plain.empty());
  float worst = 0.0f, largest = 0.0f;
  for (size_t s = 0; s < plain.size(); ++s) {
    ASSERT_EQ(plain[s].size(), cached[s].size());
    for (size_t i = 0; i < plain[s].size(); ++i) {
      worst = std::max(worst, std::abs(plain[s][i] - cached[s][i]));
      largest = std::max(largest, std::abs(plain[s][i]));
    }
  }
  // Float noise moves logits by a few BF16 roundings of K/V at most; context rows that were
  // missing or stale would move them by about their own size.
  EXPECT_LE(worst, 0.02f * largest) << "largest logit " << largest;
}

// A hybrid target (Gated DeltaNet layers among attention layers) resumes a shared prefix from
// the recurrent state kept after its last page: the first request of a start keeps the state at
// its prompt's last whole page, the next ones at the page where their match ended, and every later
// prompt of that start resumes there. Greedy tokens and every log-probability equal the uncached
// engine's bit for bit in each mode, with a roomy cache and with one that evicts pages (and their
// states) all the time, with room for many states and for one.
// The dense hybrid and the Qwen3.5 mixture of experts.
class HybridPrefixCacheEngineTest : public ::testing::TestWithParam<bool> {};

TEST_P(HybridPrefixCacheEngineTest, OutputsAndLogprobsEqualTheUncachedEngineBitForBit) {
  const DecoderConfig c =
      GetParam() ? testing::EngineTestHybridMoeConfig() : testing::EngineTestHybridConfig(2, 2);
  DecoderModel target = testing::RandomTarget(c, WeightsMode::kAsStored);
  const auto prompts = SharedPrefixPrompts(c.vocab_size);
  testing::PlantedDrafter planted(target, 16, /*salt=*/13);
  const GenerationParams params{.max_tokens = 10, .logprobs = {.enabled = true, .top = 2}};
  for (const char* mode : {"none", "dflash", "fixed:4"}) {
    Drafter* drafter = std::string(mode) == "none" ? nullptr : &planted;
    for (const int64_t kv_tokens : {int64_t{1} << 14, int64_t{4} * 96}) {
      for (const int32_t states : {16, 1}) {
        EngineConfig config{
            .policy = LengthPolicy::Parse(mode).value(), .max_running = 4, .kv_tokens = kv_tokens};
        const EngineRun plain = RunPrompts(target, drafter, config, prompts, params);
        config.prefix_cache = true;
        config.prefix_cache_states = states;
        const EngineRun cached = RunPrompts(target, drafter, config, prompts, params);
        const std::string what = std::string(mode) + " kv_tokens=" + std::to_string(kv_tokens) +
                                 " states=" + std::to_string(states);
        EXPECT_EQ(testing::FirstDifference(cached.outputs, plain.outputs), "") << what;
        for (size_t i = 0; i < prompts.size(); ++i) {
          const auto& got = cached.results[i].logprobs;
          const auto& want = plain.results[i].logprobs;
          ASSERT_EQ(got.size(), want.size()) << what << " prompt " << i;
          for (size_t t = 0; t < got.size(); ++t) {
            EXPECT_EQ(got[t].logprob, want[t].logprob) << what << " prompt " << i << " token " << t;
            ASSERT_EQ(got[t].top.size(), want[t].top.size()) << what;
            for (size_t k = 0; k < got[t].top.size(); ++k) {
              EXPECT_EQ(got[t].top[k].logprob, want[t].top[k].logprob) << what;
            }
          }
        }
        // With room, nearly every prompt after the first ones resumes two pages in or more;
        // with one state, the three starts taking turns evict each other's (what is checked
        // there is that eviction keeps the bits).
        if (states > 1) {
          EXPECT_GE(cached.stats.prefix_hit_tokens, 22 * 32) << what;
        }
        EXPECT_EQ(cached.stats.prefill_rows + cached.stats.prefix_hit_tokens,
                  plain.stats.prefill_rows)
            << what;
        EXPECT_EQ(cached.free_pages_after, cached.total_pages) << what;
        EXPECT_GE(cached.prefix_cache_states_after, 1) << what;
        EXPECT_LE(cached.prefix_cache_states_after, states) << what;  // evicted beyond
        EXPECT_EQ(plain.prefix_cache_states_after, 0) << what;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DenseAndMoe, HybridPrefixCacheEngineTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "moe" : "dense";
                         });

// Four prompts behind one start of 37 tokens, submitted together: the first writes the start's
// pages and, learning that the others wait for them, keeps its state where their prompts part
// from its own (32 positions in, before its own last whole page at 48); the other three resume
// there.
TEST(HybridPrefixCacheEngineConfigTest, RequestsSubmittedTogetherResumeWhereTheirPromptsPart) {
  const DecoderConfig c = testing::EngineTestHybridConfig(2, 2);
  DecoderModel target = testing::RandomTarget(c, WeightsMode::kAsStored);
  const auto vocab = static_cast<int32_t>(c.vocab_size) - 3;
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t i = 0; i < 4; ++i) {
    std::vector<int32_t> p(37);
    for (int32_t j = 0; j < 37; ++j) p[j] = (j * 7 + 3) % vocab;
    for (int32_t j = 0; j < 20 + i; ++j) p.push_back((31 * i + j) % vocab);
    prompts.push_back(std::move(p));
  }
  EngineConfig config{.policy = LengthPolicy::Parse("none").value(), .max_running = 4};
  const EngineRun plain = RunPrompts(target, nullptr, config, prompts, {.max_tokens = 6});
  config.prefix_cache = true;
  const EngineRun cached = RunPrompts(target, nullptr, config, prompts, {.max_tokens = 6});
  EXPECT_EQ(testing::FirstDifference(cached.outputs, plain.outputs), "");
  EXPECT_EQ(cached.stats.prefix_hit_tokens, 3 * 32);
  EXPECT_EQ(cached.stats.prefill_rows, plain.stats.prefill_rows - 3 * 32);
}

// Without room for a state, a hybrid's prompts are computed in full (and the same).
TEST(HybridPrefixCacheEngineConfigTest, NoStatesKeptMeansNoPagesShared) {
  const DecoderConfig c = testing::EngineTestHybridConfig(2, 2);
  DecoderModel target = testing::RandomTarget(c, WeightsMode::kAsStored);
  const auto prompts = SharedPrefixPrompts(c.vocab_size);
  EngineConfig config{.policy = LengthPolicy::Parse("none").value(), .max_running = 4};
  const EngineRun plain = RunPrompts(target, nullptr, config, prompts, {.max_tokens = 6});
  config.prefix_cache = true;
  config.prefix_cache_states = 0;
  const EngineRun cached = RunPrompts(target, nullptr, config, prompts, {.max_tokens = 6});
  EXPECT_EQ(testing::FirstDifference(cached.outputs, plain.outputs), "");
  EXPECT_EQ(cached.stats.prefix_hit_tokens, 0);
  EXPECT_EQ(cached.stats.prefill_rows, plain.stats.prefill_rows);
}

}  // namespace
}  // namespace dscale
