// --draft-sampling through the engine (EngineConfig::draft_sampling): what it refuses (a drafter
// that cannot sample; a head whose rows follow its draws under a policy whose lengths read those
// rows), greedy requests untouched by it, and seeded runs that reproduce. Its law is
// sampling_exactness_test.cc's.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "planted_drafter.h"
#include "spec/draft_distribution.h"

namespace dscale {
namespace {

using testing::EngineRun;
using testing::RandomPrompts;
using testing::RunPrompts;

using DraftSamplingEngineTest = testing::EngineFixture;

EngineConfig Config(const std::string& mode, DraftSampling sampling, int32_t c,
                    const dvl::Predictor* predictor = nullptr,
                    const budget::SpsTable* sps = nullptr) {
  return {.policy = LengthPolicy::Parse(mode).value(),
          .max_running = c,
          .draft_sampling = sampling,
          .inputs = {.predictor = predictor, .sps_table = sps}};
}

std::string CreateError(TargetModel& target, Drafter* drafter, const EngineConfig& config) {
  const Result<std::unique_ptr<Engine>> engine = Engine::Create(target, drafter, config);
  return engine.ok() ? "" : engine.status().message();
}

TEST_F(DraftSamplingEngineTest, RefusesDraftersThatCannotSampleAndLengthsThatReadTheDraws) {
  const auto kDist = DraftSampling::kDistribution;
  const budget::SpsTable sps{.tokens = {1, 1024}, .steps_per_second = {100, 100}};
  // A drafter that always proposes its own tokens: it cannot draw from a distribution.
  testing::PlantedDrafter planted(target_, 16, /*salt=*/3);
  std::string error = CreateError(target_, &planted, Config("dflash", kDist, 4));
  EXPECT_NE(error.find("--draft-sampling distribution: the cpu backend's drafter proposes argmax "
                       "drafts only"),
            std::string::npos)
      << error;
  EXPECT_EQ(CreateError(target_, &planted, Config("dflash", DraftSampling::kArgmax, 4)), "");
  EXPECT_EQ(CreateError(target_, &planted, Config("none", kDist, 4)), "") << "no drafter runs";

  // A Domino head's rows follow its draws: dscale's lengths would read them.
  const std::unique_ptr<DFlashDrafter> domino = testing::RandomDominoDrafter(target_, 5);
  error = CreateError(target_, domino.get(), Config("dscale", kDist, 4, &predictor_));
  EXPECT_NE(error.find("--spec dscale sets each request's rows from its draft logits"),
            std::string::npos)
      << error;
  EXPECT_EQ(CreateError(target_, domino.get(), Config("dflash", kDist, 4)), "");
  EXPECT_EQ(CreateError(target_, domino.get(), Config("fixed:5", kDist, 4)), "");
  EXPECT_EQ(CreateError(target_, domino.get(), Config("dscale", DraftSampling::kArgmax, 4,
                                                      &predictor_)),
            "");

  // DSpark: a Markov head's rows follow the draws, so dscale's predictor may not read them; its
  // confidence head reads only the draws before each draft, so dspark's walk over it may.
  const DecoderConfig& c = target_.config();
  const std::unique_ptr<DFlashDrafter> markov = testing::RandomDrafter(
      target_, 9,
      testing::TestDSparkConfig(
          c, {.markov_rank = 4, .confidence_head = true, .confidence_with_markov = true}, 15));
  EXPECT_EQ(CreateError(target_, markov.get(), Config("dspark", kDist, 4, nullptr, &sps)), "");
  error = CreateError(target_, markov.get(), Config("dscale", kDist, 4, &predictor_));
  EXPECT_NE(error.find("--spec dscale"), std::string::npos) << error;
  const std::unique_ptr<DFlashDrafter> headless = testing::RandomDrafter(
      target_, 9, testing::TestDSparkConfig(c, {.markov_rank = 4}, 15));
  error = CreateError(target_, headless.get(), Config("dspark", kDist, 4, &predictor_, &sps));
  EXPECT_NE(error.find("--spec dspark"), std::string::npos) << error;
  EXPECT_EQ(CreateError(target_, markov.get(), Config("fixed:8", kDist, 4)), "");
  const std::unique_ptr<DFlashDrafter> plain = testing::RandomDrafter(
      target_, 9, testing::TestDSparkConfig(c, {.markov_rank = 0, .confidence_head = true}, 15));
  EXPECT_EQ(CreateError(target_, plain.get(), Config("dspark", kDist, 4, nullptr, &sps)), "");
  const std::unique_ptr<DFlashDrafter> dflash = testing::RandomDrafter(target_, 9);
  EXPECT_EQ(CreateError(target_, dflash.get(), Config("dscale", kDist, 4, &predictor_)), "");
}

// Greedy requests never draw: under distribution they commit plain greedy decoding's tokens.
TEST_F(DraftSamplingEngineTest, GreedyRequestsAreUnaffected) {
  const auto prompts = RandomPrompts(6, target_.config().vocab_size, 31);
  const GenerationParams params{.max_tokens = 16};
  const EngineRun plain =
      RunPrompts(target_, nullptr, Config("none", DraftSampling::kArgmax, 6), prompts, params);
  const std::unique_ptr<DFlashDrafter> domino = testing::RandomDominoDrafter(target_, 5);
  for (const char* mode : {"dflash", "fixed:3"}) {
    const EngineRun run = RunPrompts(target_, domino.get(),
                                     Config(mode, DraftSampling::kDistribution, 6), prompts, params);
    EXPECT_EQ(testing::FirstDifference(run.outputs, plain.outputs), "") << mode;
  }
}

// Every uniform is a pure function of (seed, position, stream): a seeded run repeats itself,
// and with dflash's whole blocks (each row's bits independent of the rows beside it) at any
// concurrency — which also shows that each request's acceptance reads its own draft rows among
// the step's. Drafts are accepted, and outputs differ from argmax drafting's.
TEST_F(DraftSamplingEngineTest, SeededRunsReproduce) {
  const auto prompts = RandomPrompts(8, target_.config().vocab_size, 37);
  GenerationParams params{.max_tokens = 12, .sampling = {.temperature = 1.5f, .seed = 17}};
  const std::unique_ptr<DFlashDrafter> drafter = testing::RandomDrafter(target_, 13);
  const auto run = [&](const char* mode, DraftSampling sampling, int32_t c) {
    return RunPrompts(target_, drafter.get(), Config(mode, sampling, c, &predictor_), prompts,
                      params);
  };
  const EngineRun first = run("dflash", DraftSampling::kDistribution, 8);
  EXPECT_EQ(testing::FirstDifference(run("dflash", DraftSampling::kDistribution, 8).outputs,
                                     first.outputs),
            "");
  EXPECT_EQ(testing::FirstDifference(run("dflash", DraftSampling::kDistribution, 1).outputs,
                                     first.outputs),
            "");
  const EngineRun dscale = run("dscale", DraftSampling::kDistribution, 8);
  EXPECT_EQ(testing::FirstDifference(run("dscale", DraftSampling::kDistribution, 8).outputs,
                                     dscale.outputs),
            "");
  int64_t accepted = 0;
  for (const RequestResult& r : first.results) {
    for (int32_t a : r.accepted) accepted += a;
  }
  EXPECT_GT(accepted, 0);
  EXPECT_NE(testing::FirstDifference(run("dflash", DraftSampling::kArgmax, 8).outputs,
                                     first.outputs),
            "");
}

}  // namespace
}  // namespace dscale
