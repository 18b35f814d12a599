// logprobs through the engine: in every length policy they are the target's log-probabilities at
// each committed position — equal, within the bound stated below, to the log-softmax of one plain
// forward over the prompt and the output before that token.

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "planted_drafter.h"

namespace dscale {
namespace {

using testing::EngineRun;
using testing::RandomPrompts;
using testing::RunPrompts;

using LogprobsEngineTest = testing::EngineFixture;

// log softmax(logits / t) in double.
std::vector<double> LogSoftmax(const std::vector<float>& logits, double t) {
  double max = logits[0] / t;
  for (const float l : logits) max = std::max(max, l / t);
  double sum = 0.0;
  for (const float l : logits) sum += std::exp(l / t - max);
  std::vector<double> out;
  for (const float l : logits) out.push_back(l / t - max - std::log(sum));
  return out;
}

// Checks run's logprobs against plain forwards. A logit from a verify step has the bits of the
// same position's logit from a plain forward (every kernel is row-invariant), so the two differ
// only by the engine's rounding of its double log-softmax to float.
void ExpectTargetLogprobs(TargetModel& target, const std::vector<std::vector<int32_t>>& prompts,
                          const EngineRun& run, int32_t top, double temperature,
                          const std::string& what) {
  const auto bound = [](double want) { return 1e-6 * (1.0 + std::fabs(want)); };
  for (size_t i = 0; i < prompts.size(); ++i) {
    const RequestResult& result = run.results[i];
    ASSERT_EQ(result.logprobs.size(), result.output_ids.size()) << what;
    std::vector<int32_t> context = prompts[i];
    for (size_t j = 0; j < result.output_ids.size(); ++j) {
      const TokenLogprobs& lp = result.logprobs[j];
      const std::vector<double> want =
          LogSoftmax(testing::NextTokenLogits(target, context), temperature);
      EXPECT_EQ(lp.token, result.output_ids[j]) << what;
      EXPECT_NEAR(lp.logprob, want[lp.token], bound(want[lp.token]))
          << what << " prompt " << i << " token " << j;
      ASSERT_EQ(static_cast<int32_t>(lp.top.size()), top) << what;
      for (size_t k = 0; k < lp.top.size(); ++k) {
        EXPECT_NEAR(lp.top[k].logprob, want[lp.top[k].token], bound(want[lp.top[k].token])) << what;
        if (k > 0) {
          EXPECT_GE(lp.top[k - 1].logprob, lp.top[k].logprob) << what;
        }
      }
      // Greedy: the committed token is the most likely one.
      if (temperature == 1.0) {
        EXPECT_EQ(lp.top[0].logprob, lp.logprob) << what;
      }
      context.push_back(result.output_ids[j]);
    }
  }
}

TEST_F(LogprobsEngineTest, GreedyLogprobsAreTheTargetsInEveryModeAndConcurrency) {
  const auto prompts = RandomPrompts(6, target_.config().vocab_size, 17);
  testing::PlantedDrafter planted(target_, 16, /*salt=*/4);
  GenerationParams params{.max_tokens = 12, .logprobs = {.enabled = true, .top = 5}};
  for (const char* mode : {"none", "dflash", "fixed:4", "dscale"}) {
    for (const int32_t c : {1, 4}) {
      const EngineConfig config{.policy = LengthPolicy::Parse(mode).value(),
                                .max_running = c,
                                .inputs = {.predictor = &predictor_}};
      Drafter* drafter = std::string(mode) == "none" ? nullptr : &planted;
      const EngineRun run = RunPrompts(target_, drafter, config, prompts, params);
      ExpectTargetLogprobs(target_, prompts, run, 5, 1.0,
                           std::string(mode) + " c=" + std::to_string(c));
    }
  }
}

TEST_F(LogprobsEngineTest, SampledLogprobsFollowTheTemperatureAndStreamWithTheirTokens) {
  const auto prompts = RandomPrompts(4, target_.config().vocab_size, 23);
  testing::PlantedDrafter planted(target_, 16, /*salt=*/8);
  std::vector<size_t> streamed(prompts.size(), 0);
  GenerationParams params{.max_tokens = 10,
                          .sampling = {.temperature = 0.7f, .seed = 11},
                          .logprobs = {.enabled = true, .top = 2}};
  int events = 0;
  params.on_tokens = [&](const TokenEvent& event) {
    EXPECT_EQ(event.new_logprobs.size(), event.new_tokens.size());
    for (size_t j = 0; j < event.new_tokens.size(); ++j) {
      EXPECT_EQ(event.new_logprobs[j].token, event.new_tokens[j]);
    }
    ++events;
  };
  const EngineConfig config{.policy = LengthPolicy::Parse("dflash").value(), .max_running = 4};
  const EngineRun run = RunPrompts(target_, &planted, config, prompts, params);
  EXPECT_GT(events, 0);
  ExpectTargetLogprobs(target_, prompts, run, 2, 0.7, "dflash sampled");
}

// Drafts drawn from the drafter's distribution change which tokens are committed, never what
// their log-probabilities are: the target's.
TEST_F(LogprobsEngineTest, DistributionDraftingReportsTheTargetsLogprobs) {
  const auto prompts = RandomPrompts(4, target_.config().vocab_size, 29);
  const std::unique_ptr<DFlashDrafter> drafter = testing::RandomDrafter(target_, 7);
  const GenerationParams params{.max_tokens = 10,
                                .sampling = {.temperature = 0.7f, .seed = 3},
                                .logprobs = {.enabled = true, .top = 3}};
  const EngineConfig config{.policy = LengthPolicy::Parse("dflash").value(),
                            .max_running = 4,
                            .draft_sampling = DraftSampling::kDistribution};
  const EngineRun run = RunPrompts(target_, drafter.get(), config, prompts, params);
  ExpectTargetLogprobs(target_, prompts, run, 3, 0.7, "dflash distribution");
}

TEST_F(LogprobsEngineTest, RequestsWithoutLogprobsGetNoneAndTooManyTopAreRefused) {
  const auto prompts = RandomPrompts(2, target_.config().vocab_size, 5);
  const EngineConfig config{.policy = LengthPolicy::Parse("none").value()};
  const EngineRun run = RunPrompts(target_, nullptr, config, prompts, {.max_tokens = 4});
  for (const RequestResult& r : run.results) EXPECT_TRUE(r.logprobs.empty());
  auto engine = Engine::Create(target_, nullptr, config).value();
  const Status refused = engine->CheckRequest(
      prompts[0], {.max_tokens = 4, .logprobs = {.enabled = true, .top = kMaxTopLogprobs + 1}});
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message().rfind("top_logprobs: ", 0), 0u) << refused.message();
}

}  // namespace
}  // namespace dscale
