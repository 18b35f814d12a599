// Speculation on a Qwen3-MoE target (EngineTestMoeConfig: sparse and dense layers mixed): greedy
// output in every mode — none, dflash, fixed:K, dscale at a fraction and with auto, dspark — at
// c = 1 and 16 equals plain greedy decoding token for token, with norm_topk_prob both ways, as
// stored (BF16) and with the experts in int4 under int8 activations. A verified row routes to its
// experts and computes them as a decoded row does, whatever rows share the step
// (tests/model/moe_layer_test.cc checks the block itself); the verify pass counts the experts
// its rows wake, and auto prices draft rows by them.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "engine/engine.h"
#include "engine/step_trace.h"
#include "engine_test_util.h"
#include "every_mode_lossless.h"
#include "model/quantize_weights.h"
#include "model/random_checkpoint.h"
#include "planted_drafter.h"

namespace dscale {
namespace {

class MoeEngineTest : public ::testing::TestWithParam<std::tuple<bool, WeightsMode>> {};

TEST_P(MoeEngineTest, GreedyOutputEqualsPlainDecodingInEveryModeAndConcurrency) {
  const auto [norm_topk_prob, weights_mode] = GetParam();
  DecoderModel target =
      testing::RandomTarget(testing::EngineTestMoeConfig(norm_topk_prob), weights_mode);
  ASSERT_FALSE(target.weights().layers[0].moe.empty());
  ASSERT_TRUE(target.weights().layers[1].moe.empty());
  testing::ExpectEveryModeEqualsPlainDecoding(target);
}

INSTANTIATE_TEST_SUITE_P(NormAndWeights, MoeEngineTest,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Values(WeightsMode::kAsStored,
                                                              WeightsMode::kInt4)),
                         [](const ::testing::TestParamInfo<std::tuple<bool, WeightsMode>>& info) {
                           return std::string(std::get<0>(info.param) ? "norm_topk" : "raw_topk") +
                                  "_" +
                                  (std::get<1>(info.param) == WeightsMode::kInt4 ? "int4" : "bf16");
                         });

// The verify pass counts the experts its rows wake (StepStats::verify_experts_per_layer): one row
// wakes exactly k per sparse layer, four rows between k and 4·k, and a dense target none.
TEST(MoeEngineStatsTest, VerifyStepsCountTheExpertsTheirRowsWake) {
  auto experts_per_step = [](const DecoderConfig& c, int32_t concurrency) {
    DecoderModel target(c, RandomDecoderWeights(c, 5, DType::kBF16));
    auto engine =
        Engine::Create(target, nullptr,
                       {.policy = LengthPolicy::Parse("none").value(), .max_running = concurrency})
            .value();
    for (uint32_t i = 1; i <= 4; ++i) {
      EXPECT_TRUE(engine
                      ->Submit(testing::RandomTokens(static_cast<int32_t>(4 + i), 120, i),
                               {.max_tokens = 6})
                      .ok());
    }
    EXPECT_TRUE(engine->RunToCompletion().ok());
    const StepStats& s = engine->stats();
    EXPECT_GT(s.decode_steps, 0);
    EXPECT_EQ(s.expert_counted_steps, c.SparseLayerCount() > 0 ? s.decode_steps : 0)
        << "no prompt rode in a verify pass here (the prompts start together)";
    return s.expert_counted_steps > 0 ? s.verify_experts_per_layer / double(s.expert_counted_steps)
                                      : 0.0;
  };
  const DecoderConfig moe = testing::EngineTestMoeConfig(true);  // 8 experts, top 2
  EXPECT_DOUBLE_EQ(experts_per_step(moe, 1), 2.0);
  const double four = experts_per_step(moe, 4);
  EXPECT_GT(four, 2.0);
  EXPECT_LE(four, 8.0);
  EXPECT_EQ(experts_per_step(testing::EngineTestTargetConfig(), 4), 0.0);
}

// A prompt on a mixture of experts waits (EngineConfig::prompt_wait_steps, the default) while a
// running request is about to finish, and then prefills in one pass with the prompt of the
// request that takes the freed slot; with the wait off each prompt rides alone. Outputs are the
// same tokens.
// Three running: A (3 tokens), B (4), C (12); D and E queued. A finishes after step 2, and D,
// admitted at step 3, finds B one token from its end: it waits a step, and E, admitted at step 4
// in B's slot, prefills with it.
TEST(MoePromptWaitTest, ALonePromptWaitsForTheNextFinishedRequestsPrompt) {
  const DecoderConfig c = testing::EngineTestMoeConfig(true);
  DecoderModel target(c, RandomDecoderWeights(c, 5, DType::kBF16));
  const std::vector<int32_t> max_tokens = {3, 4, 12, 5, 5};
  const auto run = [&](int32_t wait_steps, std::vector<int64_t>* prompt_rows) {
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("dscale_prompt_wait_" + std::to_string(::getpid()) + ".jsonl"))
                                 .string();
    std::vector<std::vector<int32_t>> outputs;
    {
      std::unique_ptr<StepTrace> trace = StepTrace::Open(path).value();
      auto engine = Engine::Create(target, nullptr,
                                   {.policy = LengthPolicy::Parse("none").value(),
                                    .max_running = 3,
                                    .prompt_wait_steps = wait_steps,
                                    .step_trace = trace.get()})
                        .value();
      std::vector<RequestId> ids;
      for (uint32_t i = 0; i < max_tokens.size(); ++i) {
        ids.push_back(engine
                          ->Submit(testing::RandomTokens(static_cast<int32_t>(6 + i), 120, i + 1),
                                   {.max_tokens = max_tokens[i]})
                          .value());
      }
      EXPECT_TRUE(engine->RunToCompletion().ok());
      EXPECT_EQ(engine->stats().prompt_wait_steps, wait_steps > 0 ? 1 : 0);
      std::vector<RequestResult> results = engine->TakeFinished();
      for (const RequestId id : ids) {
        for (const RequestResult& r : results) {
          if (r.id == id) outputs.push_back(r.output_ids);
        }
      }
    }
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      prompt_rows->push_back(nlohmann::json::parse(line)["prompt_rows"].get<int64_t>());
    }
    std::filesystem::remove(path);
    return outputs;
  };
  std::vector<int64_t> waiting_rows, riding_rows;
  const auto waiting = run(EngineConfig{}.prompt_wait_steps, &waiting_rows);
  const auto riding = run(0, &riding_rows);
  EXPECT_EQ(waiting, riding);
  const int64_t d_rows = 6 + 3, e_rows = 6 + 4;
  // Steps 1-2 decode the first three (their prompts ran alone, before step 1 decoded).
  ASSERT_GE(riding_rows.size(), 5u);
  EXPECT_EQ(riding_rows[2], d_rows);  // step 3: D rides alone
  EXPECT_EQ(riding_rows[3], e_rows);  // step 4: E rides alone
  ASSERT_GE(waiting_rows.size(), 5u);
  EXPECT_EQ(waiting_rows[2], 0);                // step 3: D waits
  EXPECT_EQ(waiting_rows[3], d_rows + e_rows);  // step 4: D and E in one pass (C runs on)
}

// With --verify-budget auto on a sparse target the budget prices draft rows by their experts: the
// engine hands it each step's span occupancy (prompts of at least 16 tokens show u(16)) and the
// experts its verify woke. auto-rows, and any dense target, keep no expert model.
TEST(MoeEngineStatsTest, AutoPricesDraftRowsByTheExpertsThePromptsShowed) {
  const DecoderConfig moe = testing::EngineTestMoeConfig(true);  // 8 experts, top 2
  const auto run = [](const DecoderConfig& c, const char* budget) {
    DecoderModel target(c, RandomDecoderWeights(c, 5, DType::kBF16));
    const dvl::Predictor predictor = testing::RandomPredictor(c.hidden_size, c.vocab_size, 3);
    testing::PlantedDrafter planted(target, 16, /*salt=*/24);
    std::vector<std::vector<int32_t>> prompts;
    for (uint32_t i = 0; i < 6; ++i) {
      prompts.push_back(testing::RandomTokens(static_cast<int32_t>(18 + i), 120, i + 1));
    }
    const EngineConfig config{
        .policy = LengthPolicy::Parse("dscale").value(),
        .max_running = 4,
        .inputs = {.predictor = &predictor,
                   .verify_budget = budget::VerifyBudget::Parse(budget).value()}};
    return testing::RunPrompts(target, &planted, config, prompts, {.max_tokens = 12});
  };
  const testing::EngineRun priced = run(moe, "auto");
  ASSERT_TRUE(priced.stats.auto_budget.has_value());
  const budget::AutoBudgetSnapshot& a = *priced.stats.auto_budget;
  EXPECT_TRUE(a.experts_priced);
  // u(16) − u(1): more than none, at most the experts a request's first row left asleep.
  EXPECT_GT(a.expert_own_rows, 0.0);
  EXPECT_LE(a.expert_own_rows, 8.0 - 2.0);
  EXPECT_FALSE(run(moe, "auto-rows").stats.auto_budget->experts_priced);
  EXPECT_FALSE(run(testing::EngineTestTargetConfig(), "auto").stats.auto_budget->experts_priced);
}

}  // namespace
}  // namespace dscale
