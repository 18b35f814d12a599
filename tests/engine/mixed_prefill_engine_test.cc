// Mixed prefill (EngineConfig::mixed_prefill): a step in which some request decodes runs the
// prompt chunks of the others in its verify pass, after the packed rows. Every kernel gives a row
// the same bits whatever rows share its pass, so a prompt's K/V rows, recurrent state, features
// and first token are those a pass of its own gives: the outputs equal plain greedy decoding and
// each request's drafts (which read the prompt's features through the draft context) equal those
// of the engine that prefills alone. On a dense, a hybrid (Gated DeltaNet) and a
// mixture-of-experts target, prompts cut into 7-row chunks so that most of them ride in verify
// passes over several steps.

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "backend/cpu_backend.h"
#include "engine/engine.h"
#include "engine_test_util.h"
#include "model/greedy_decode.h"
#include "model/poisoned_target.h"
#include "model/random_checkpoint.h"

namespace dscale {
namespace {

DecoderConfig TargetConfig(const std::string& family) {
  if (family == "hybrid") return testing::EngineTestHybridConfig(2, 4);
  if (family == "moe") return testing::EngineTestMoeConfig(/*norm_topk_prob=*/true);
  return testing::EngineTestTargetConfig();
}

// Each request's drafted blocks, in order (a request's blocks depend only on its own context).
using DraftsById = std::map<RequestId, std::vector<std::vector<int32_t>>>;

class MixedPrefillEngineTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MixedPrefillEngineTest, PromptsInTheVerifyPassChangeNoTokenAndNoDraft) {
  const DecoderConfig c = TargetConfig(GetParam());
  DecoderModel target(c, RandomDecoderWeights(c, 5, DType::kBF16));
  std::unique_ptr<DFlashDrafter> drafter = testing::RandomDrafter(target, 6);
  const auto prompts = testing::RandomPrompts(12, c.vocab_size, 29, /*max_length=*/60);
  std::vector<std::vector<int32_t>> expected;
  int64_t prompt_rows = 0;
  for (const auto& p : prompts) {
    expected.push_back(
        GreedyDecode(target, p, {.max_new_tokens = 16, .stop_ids = c.eos_token_ids}).value());
    prompt_rows += static_cast<int64_t>(p.size());
  }
  for (const char* spec : {"none", "fixed:8"}) {
    std::map<bool, DraftsById> drafts;
    for (const bool mixed : {false, true}) {
      SCOPED_TRACE(::testing::Message() << spec << (mixed ? " mixed" : " separate"));
      DraftsById& blocks = drafts[mixed];
      EngineConfig config{.policy = LengthPolicy::Parse(spec).value(),
                          .max_running = 4,
                          .prefill_chunk = 7,
                          .mixed_prefill = mixed,
                          .cut_blocks_at_output_end = false};  // every fed request drafts
      config.on_step = [&blocks](const StepRecord& step) {
        if (step.drafts == nullptr) return;
        const int32_t width = step.drafts->candidates;
        for (size_t i = 0; i < step.ids.size(); ++i) {
          const auto first = step.drafts->tokens.begin() + static_cast<int64_t>(i) * width;
          blocks[step.ids[i]].emplace_back(first, first + width);
        }
      };
      Drafter* drafting = config.policy.UsesDrafter() ? drafter.get() : nullptr;
      const testing::EngineRun run = testing::RunPrompts(
          target, drafting, config, prompts, {.max_tokens = 16, .stop_ids = c.eos_token_ids});
      EXPECT_EQ(testing::FirstDifference(run.outputs, expected), "");
      EXPECT_EQ(run.stats.prefill_rows, prompt_rows);
      if (mixed) {
        EXPECT_GT(run.stats.mixed_prefill_rows, prompt_rows / 3)
            << "most prompts arrive while others decode";
      } else {
        EXPECT_EQ(run.stats.mixed_prefill_rows, 0);
      }
      EXPECT_EQ(run.free_pages_after, run.total_pages);
    }
    EXPECT_EQ(drafts[true], drafts[false]) << spec;
    if (std::string(spec) != "none") {
      EXPECT_EQ(drafts[true].size(), prompts.size()) << "every request drafted";
      std::set<int32_t> tokens;
      for (const auto& [id, blocks] : drafts[true]) {
        for (const auto& block : blocks) tokens.insert(block.begin(), block.end());
      }
      EXPECT_GE(tokens.size(), 5u) << "drafts that follow their contexts (a seed whose drafter "
                                      "proposes one token everywhere would compare nothing)";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, MixedPrefillEngineTest,
                         ::testing::Values("dense", "hybrid", "moe"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// Mixed prefill needs a backend whose verify takes prompt rows; the engine over one that cannot
// (a device verify in fixed workspaces) prefills alone, and the CPU backend says it can.
TEST(MixedPrefillEngineTest, OnlyABackendWhoseVerifyTakesPromptRowsMixes) {
  const DecoderConfig c = testing::EngineTestTargetConfig();
  DecoderModel target(c, RandomDecoderWeights(c, 5, DType::kBF16));
  CpuBackend cpu(target, nullptr);
  EXPECT_TRUE(cpu.VerifyTakesPromptRows());
  struct Separate final : testing::DelegatingBackend {
    using DelegatingBackend::DelegatingBackend;
    Result<TargetPass> Verify(const StepBatch& packed, std::span<const AcceptRequest> requests,
                              PagedKvCache& cache, ForwardOutput* out) override {
      EXPECT_EQ(packed.num_spans(), static_cast<int32_t>(requests.size()))
          << "no prompt span rides in this backend's verify";
      return DelegatingBackend::Verify(packed, requests, cache, out);
    }
  } separate(cpu);
  const auto prompts = testing::RandomPrompts(8, c.vocab_size, 31, /*max_length=*/40);
  const testing::EngineRun run = testing::RunPrompts(
      separate,
      {.policy = LengthPolicy::Parse("none").value(), .max_running = 3, .prefill_chunk = 5},
      prompts, {.max_tokens = 8});
  EXPECT_EQ(run.stats.mixed_prefill_rows, 0);
  EXPECT_EQ(run.outputs.size(), prompts.size());
}

// A prompt's first token comes from the mixed pass's logits row after the packed rows': seeded
// sampling with log-probabilities gives the same tokens and the same log-probabilities, bit for
// bit, mixed or not (the first token's included), while other requests draft and verify beside it.
TEST(MixedPrefillEngineTest, SampledTokensAndLogprobsAreThoseOfPromptsPrefilledAlone) {
  const DecoderConfig c = testing::EngineTestTargetConfig();
  DecoderModel target(c, RandomDecoderWeights(c, 5, DType::kBF16));
  std::unique_ptr<DFlashDrafter> drafter = testing::RandomDrafter(target, 6);
  const auto prompts = testing::RandomPrompts(10, c.vocab_size, 37, /*max_length=*/50);
  const GenerationParams params{.max_tokens = 12,
                                .sampling = {.temperature = 0.8f, .seed = 11},
                                .logprobs = {.enabled = true, .top = 3}};
  std::map<bool, testing::EngineRun> runs;
  for (const bool mixed : {false, true}) {
    runs[mixed] = testing::RunPrompts(target, drafter.get(),
                                      {.policy = LengthPolicy::Parse("fixed:8").value(),
                                       .max_running = 4,
                                       .prefill_chunk = 9,
                                       .mixed_prefill = mixed},
                                      prompts, params);
  }
  EXPECT_GT(runs[true].stats.mixed_prefill_rows, 0);
  EXPECT_EQ(testing::FirstDifference(runs[true].outputs, runs[false].outputs), "");
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto& got = runs[true].results[p].logprobs;
    const auto& want = runs[false].results[p].logprobs;
    ASSERT_EQ(got.size(), want.size()) << "prompt " << p;
    ASSERT_EQ(got.size(), runs[true].outputs[p].size());
    for (size_t t = 0; t < got.size(); ++t) {
      SCOPED_TRACE(::testing::Message() << "prompt " << p << " token " << t);
      EXPECT_EQ(got[t].token, want[t].token);
      EXPECT_EQ(std::bit_cast<uint32_t>(got[t].logprob), std::bit_cast<uint32_t>(want[t].logprob));
      ASSERT_EQ(got[t].top.size(), want[t].top.size());
      for (size_t k = 0; k < got[t].top.size(); ++k) {
        EXPECT_EQ(got[t].top[k].token, want[t].top[k].token);
        EXPECT_EQ(std::bit_cast<uint32_t>(got[t].top[k].logprob),
                  std::bit_cast<uint32_t>(want[t].top[k].logprob));
      }
    }
  }
}

// A prompt cut off while it rides in verify passes — cancelled by its client, or its first
// token's logits NaN — ends alone: its K/V pages and draft context are freed, and the requests
// decoding beside it (and the next prompt, which rides in their passes after it) commit plain
// decoding's tokens.
TEST(MixedPrefillEngineTest, APromptCancelledOrFailingInAVerifyPassEndsAlone) {
  const DecoderConfig c = testing::EngineTestTargetConfig();
  DecoderModel target(c, RandomDecoderWeights(c, 5, DType::kBF16));
  std::unique_ptr<DFlashDrafter> drafter = testing::RandomDrafter(target, 6);
  const int32_t marker = static_cast<int32_t>(c.vocab_size) - 1;  // RandomPrompts never draws it
  auto prompts = testing::RandomPrompts(4, c.vocab_size, 41, /*max_length=*/12);
  prompts[2].assign(60, 7);  // 60 rows: nine 7-row chunks, over several decode steps
  prompts[2][0] = marker;
  const GenerationParams params{.max_tokens = 24};  // no stop ids: every request runs 24
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) {
    expected.push_back(GreedyDecode(target, p, {.max_new_tokens = 24}).value());
  }
  testing::PoisonedTarget poisoned(target, marker, /*from_position=*/0);
  for (const bool cancel : {true, false}) {
    SCOPED_TRACE(cancel ? "cancelled" : "NaN logits");
    TargetModel& model = cancel ? static_cast<TargetModel&>(target) : poisoned;
    auto engine = Engine::Create(model, drafter.get(),
                                 {.policy = LengthPolicy::Parse("fixed:8").value(),
                                  .max_running = 4,
                                  .prefill_chunk = 7})
                      .value();
    std::vector<RequestId> ids;
    for (int i = 0; i < 2; ++i) ids.push_back(engine->Submit(prompts[i], params).value());
    ASSERT_TRUE(engine->Step().ok());  // both prompts prefilled; they decode from here
    ids.push_back(engine->Submit(prompts[2], params).value());
    ids.push_back(engine->Submit(prompts[3], params).value());
    for (int step = 0; step < 3; ++step) ASSERT_TRUE(engine->Step().ok());
    EXPECT_GT(engine->stats().mixed_prefill_rows, 0) << "the long prompt rides in verify passes";
    EXPECT_LT(engine->stats().prefill_rows,
              static_cast<int64_t>(prompts[0].size() + prompts[1].size() + prompts[2].size() +
                                   prompts[3].size()))
        << "the long prompt is still being prefilled";
    if (cancel) engine->Cancel(ids[2]);
    ASSERT_TRUE(engine->RunToCompletion().ok());
    int finished = 0;
    for (const RequestResult& r : engine->TakeFinished()) {
      const size_t i = std::find(ids.begin(), ids.end(), r.id) - ids.begin();
      ++finished;
      if (i == 2) {
        EXPECT_EQ(r.finish_reason, cancel ? FinishReason::kCancelled : FinishReason::kError);
        if (!cancel) {
          EXPECT_NE(r.error.find("NaN"), std::string::npos) << r.error;
        }
        EXPECT_TRUE(r.output_ids.empty());
        continue;
      }
      EXPECT_EQ(r.finish_reason, FinishReason::kLength) << r.error;
      EXPECT_EQ(testing::FirstDifference(r.output_ids, expected[i]), "") << "request " << i;
    }
    EXPECT_EQ(finished, 4);
    EXPECT_EQ(engine->free_kv_pages(), engine->total_kv_pages());
  }
  EXPECT_GT(poisoned.poisoned_rows(), 0);
}

}  // namespace
}  // namespace dscale
