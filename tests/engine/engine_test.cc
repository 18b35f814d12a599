#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "backend/cpu_backend.h"
#include "engine/kv_budget.h"
#include "engine_test_util.h"
#include "model/greedy_decode.h"
#include "model/poisoned_target.h"
#include "model/quantize_weights.h"
#include "model/random_checkpoint.h"
#include "planted_drafter.h"

namespace dscale {
namespace {

using testing::EngineRun;
using testing::EngineTestTargetConfig;
using testing::RandomPrompts;
using testing::RunPrompts;

class EngineTest : public testing::EngineFixture {
 protected:
  // Plain greedy outputs, stopping at EOS unless `ignore_eos`.
  std::vector<std::vector<int32_t>> Reference(const std::vector<std::vector<int32_t>>& prompts,
                                              int32_t max_tokens, bool ignore_eos = false,
                                              KvDtype kv = KvDtype::kBf16) {
    std::vector<std::vector<int32_t>> outputs;
    for (const auto& p : prompts) {
      GreedyOptions options{.max_new_tokens = max_tokens, .kv_dtype = kv};
      if (!ignore_eos) options.stop_ids = target_.config().eos_token_ids;
      outputs.push_back(GreedyDecode(target_, p, options).value());
    }
    return outputs;
  }

  GenerationParams Greedy(int32_t max_tokens) {
    return {.max_tokens = max_tokens, .stop_ids = target_.config().eos_token_ids};
  }
};

// The losslessness tests run on the default BF16 cache and on an f32 one.
class EngineKvDtypeTest : public EngineTest, public ::testing::WithParamInterface<KvDtype> {};

// Greedy output is identical across none, dflash and fixed:4..16 at c = 1 and c = 16, token for
// token: every kernel gives a row the same bits whatever rows share its step, so no near-tie can
// part them. Every other test here compares with plain decoding the same way.
// Drafts come from the planted-error drafter (so every accepted length occurs), and for dflash
// also from a random DFlash drafter (the real drafting path, which accepts almost nothing).
TEST_P(EngineKvDtypeTest, GreedyOutputIsIdenticalAcrossModesAndConcurrency) {
  const KvDtype kv = GetParam();
  const auto prompts = RandomPrompts(50, target_.config().vocab_size, 1);
  const auto expected = Reference(prompts, 20, /*ignore_eos=*/false, kv);
  std::unique_ptr<DFlashDrafter> dflash = testing::RandomDrafter(target_, 9);
  testing::PlantedDrafter planted(target_, 16, /*salt=*/21);
  std::vector<std::pair<std::string, Drafter*>> modes = {
      {"none", nullptr}, {"dflash", dflash.get()}, {"dflash", &planted}};
  for (int k = 4; k <= 16; ++k) modes.emplace_back("fixed:" + std::to_string(k), &planted);
  for (const auto& [mode, drafter] : modes) {
    for (int32_t c : {1, 16}) {
      EngineConfig config{
          .policy = LengthPolicy::Parse(mode).value(), .max_running = c, .kv_dtype = kv};
      const EngineRun run = RunPrompts(target_, drafter, config, prompts, Greedy(20));
      EXPECT_EQ(testing::FirstDifference(run.outputs, expected), "") << mode << " c=" << c;
      EXPECT_EQ(run.free_pages_after, run.total_pages) << mode;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KvDtypes, EngineKvDtypeTest,
                         ::testing::Values(KvDtype::kBf16, KvDtype::kF32), testing::KvDtypeCase);

// The planted-error drafter proposes the true greedy continuation with one wrong token per step;
// the accepted count must equal the drafts before that error, capped by the rows verified: the
// policy's, and no more than the tokens the request may still commit.
TEST_F(EngineTest, PlantedErrorsSetTheAcceptedLengthsExactly) {
  const auto prompts = RandomPrompts(24, target_.config().vocab_size, 2);
  const int32_t max_tokens = 40;
  // The continuation past EOS too: the last step may verify drafts beyond the stop token.
  const auto expected = Reference(prompts, max_tokens, /*ignore_eos=*/true);
  for (const std::string mode : {"dflash", "fixed:4", "fixed:9"}) {
    testing::PlantedDrafter drafter(target_, 16, /*salt=*/7);
    const LengthPolicy policy = LengthPolicy::Parse(mode).value();
    // Rows each request verifies: the whole block (dflash) or K (fixed:K).
    const int32_t rows = policy.mode == SpecMode::kFixed ? policy.fixed_rows : 16;
    EngineConfig config{.policy = policy, .max_running = 16};
    const EngineRun run = RunPrompts(target_, &drafter, config, prompts, Greedy(max_tokens));
    int long_accepts = 0, short_accepts = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const std::vector<int32_t>& truth = expected[i];
      const size_t out_len = run.outputs[i].size();
      ASSERT_LE(out_len, truth.size());
      const std::vector<int32_t> committed_truth(truth.begin(), truth.begin() + out_len);
      ASSERT_EQ(testing::FirstDifference(run.outputs[i], committed_truth), "") << mode;
      // Replay the steps: the context is the prompt plus the committed output and the anchor.
      std::vector<int32_t> context = prompts[i];
      context.push_back(truth[0]);
      size_t produced = 1;
      for (int32_t accepted : run.results[i].accepted) {
        const int32_t error = drafter.ErrorPosition(context);
        const auto tokens_left = static_cast<int32_t>(max_tokens - produced);
        EXPECT_EQ(accepted, std::min({error - 1, rows - 1, tokens_left - 1})) << mode;
        (accepted >= 8 ? long_accepts : short_accepts)++;
        context.insert(context.end(), truth.begin() + produced,
                       truth.begin() + produced + accepted + 1);
        produced += accepted + 1;
      }
      EXPECT_GE(produced, out_len);
    }
    if (policy.mode == SpecMode::kDFlash) {
      EXPECT_GT(long_accepts, 0);
    }
    EXPECT_GT(short_accepts, 0);
  }
}

// A block is cut at the tokens its request may still commit, and a request with one token left
// is not drafted: one request at a time, the drafter's whole block under dflash, every max_tokens
// from 1 to 6; the output is plain decoding's.
TEST_F(EngineTest, NoRowIsVerifiedPastTheOutputsEnd) {
  const auto prompts = RandomPrompts(1, target_.config().vocab_size, 12);
  testing::PlantedDrafter drafter(target_, 16, /*salt=*/9, /*error_free_share=*/1.0);
  for (int32_t max_tokens = 1; max_tokens <= 6; ++max_tokens) {
    SCOPED_TRACE("max_tokens " + std::to_string(max_tokens));
    int32_t produced = 1;  // the prefill's token
    int64_t steps = 0;
    EngineConfig config{.policy = LengthPolicy::Parse("dflash").value(),
                        .max_running = 1,
                        .on_step = [&](const StepRecord& step) {
                          const int32_t left = max_tokens - produced;
                          EXPECT_EQ(step.rows[0], left) << "the whole block, cut at the end";
                          EXPECT_EQ(step.drafts == nullptr, left == 1)
                              << "drafted iff it can use it";
                          produced += step.accepted[0] + 1;
                          ++steps;
                        }};
    const EngineRun run =
        RunPrompts(target_, &drafter, config, prompts, {.max_tokens = max_tokens});
    EXPECT_EQ(testing::FirstDifference(run.outputs, Reference(prompts, max_tokens, true)), "");
    EXPECT_EQ(produced, std::max(max_tokens, 1));
    EXPECT_LE(steps, 1) << "drafts that are all right finish it in one step";
  }
}

// collect's engine keeps whole blocks to the end (cut_blocks_at_output_end = false): its traces
// label every draft of a block by whether the target accepts it.
TEST_F(EngineTest, UncutBlocksVerifyTheWholeBlockToTheEnd) {
  const auto prompts = RandomPrompts(1, target_.config().vocab_size, 12);
  testing::PlantedDrafter drafter(target_, 16, /*salt=*/9, /*error_free_share=*/1.0);
  int64_t steps = 0;
  EngineConfig config{.policy = LengthPolicy::Parse("dflash").value(),
                      .max_running = 1,
                      .cut_blocks_at_output_end = false,
                      .on_step = [&](const StepRecord& step) {
                        EXPECT_EQ(step.rows[0], 16);
                        EXPECT_NE(step.drafts, nullptr);
                        EXPECT_EQ(step.accepted[0], 15) << "every planted draft is right";
                        ++steps;
                      }};
  const EngineRun run = RunPrompts(target_, &drafter, config, prompts, {.max_tokens = 2});
  EXPECT_EQ(testing::FirstDifference(run.outputs, Reference(prompts, 2, true)), "");
  EXPECT_EQ(steps, 1);
}

TEST_F(EngineTest, RequestsJoiningAndLeavingDoNotDisturbEachOther) {
  const auto prompts = RandomPrompts(12, target_.config().vocab_size, 3);
  const auto expected = Reference(prompts, 48, /*ignore_eos=*/true);
  testing::PlantedDrafter drafter(target_, 16, 3);
  EngineConfig config{.policy = LengthPolicy::Parse("dflash").value(), .max_running = 4};
  auto engine = Engine::Create(target_, &drafter, config).value();
  std::vector<RequestId> ids;
  const GenerationParams params{.max_tokens = 48};  // no stop ids: every request runs 48
  for (int i = 0; i < 6; ++i) ids.push_back(engine->Submit(prompts[i], params).value());
  ASSERT_TRUE(engine->Step().ok());
  ASSERT_TRUE(engine->Step().ok());
  engine->Cancel(ids[1]);  // running (at most 1 + 2·16 of its 48 tokens are out)
  engine->Cancel(ids[5]);  // still queued
  for (int i = 6; i < 12; ++i) ids.push_back(engine->Submit(prompts[i], params).value());
  ASSERT_TRUE(engine->RunToCompletion().ok());
  int finished = 0;
  for (const RequestResult& r : engine->TakeFinished()) {
    const size_t i = std::find(ids.begin(), ids.end(), r.id) - ids.begin();
    ++finished;
    if (i == 1 || i == 5) {
      EXPECT_EQ(r.finish_reason, FinishReason::kCancelled);
      ASSERT_LE(r.output_ids.size(), expected[i].size());
      const std::vector<int32_t> prefix(expected[i].begin(),
                                        expected[i].begin() + r.output_ids.size());
      EXPECT_EQ(testing::FirstDifference(r.output_ids, prefix), "");
      if (i == 5) {
        EXPECT_TRUE(r.output_ids.empty());
      }
      continue;
    }
    EXPECT_EQ(testing::FirstDifference(r.output_ids, expected[i]), "");
  }
  EXPECT_EQ(finished, 12);
  EXPECT_EQ(engine->free_kv_pages(), engine->total_kv_pages());
}

// A request whose logits turn NaN (as an overflowing model's do) fails alone, at prefill or while
// decoding, greedy or sampled: FinishReason::kError saying why, its KV pages freed, and the
// other requests' outputs as if it had not been there.
TEST_F(EngineTest, ARequestWithNonFiniteLogitsFailsAloneAndFreesItsPages) {
  const int32_t marker = static_cast<int32_t>(target_.config().vocab_size) - 1;  // never drawn
  auto prompts = RandomPrompts(6, target_.config().vocab_size, 11);
  for (const size_t i : {1, 4}) {  // 41 tokens: position 48 comes while decoding
    prompts[i].resize(40, 5);
    prompts[i].insert(prompts[i].begin(), marker);
  }
  const auto expected = Reference(prompts, 24, /*ignore_eos=*/true);
  testing::PlantedDrafter drafter(target_, 16, 3);
  const EngineConfig config{.policy = LengthPolicy::Parse("dflash").value(), .max_running = 4};
  for (const int32_t from_position : {0, 48}) {  // the first token (prefill), or past the prompt
    for (const float temperature : {0.0f, 0.8f}) {
      SCOPED_TRACE("from position " + std::to_string(from_position) + ", temperature " +
                   std::to_string(temperature));
      testing::PoisonedTarget poisoned(target_, marker, from_position);
      const GenerationParams params{.max_tokens = 24,
                                    .sampling = {.temperature = temperature, .seed = 3}};
      const EngineRun run = RunPrompts(poisoned, &drafter, config, prompts, params);
      EXPECT_GT(poisoned.poisoned_rows(), 0);
      for (size_t i = 0; i < prompts.size(); ++i) {
        const RequestResult& r = run.results[i];
        if (i == 1 || i == 4) {
          EXPECT_EQ(r.finish_reason, FinishReason::kError);
          EXPECT_NE(r.error.find("NaN"), std::string::npos) << r.error;
          EXPECT_LT(r.output_ids.size(), 24u);
          continue;
        }
        EXPECT_EQ(r.finish_reason, FinishReason::kLength) << r.error;
        EXPECT_EQ(r.output_ids.size(), 24u);
        if (temperature == 0.0f) {
          EXPECT_EQ(testing::FirstDifference(r.output_ids, expected[i]), "");
        }
      }
      EXPECT_EQ(run.free_pages_after, run.total_pages);
    }
  }
}

TEST_F(EngineTest, RequestsWaitForKvPagesInsteadOfFailing) {
  const auto prompts = RandomPrompts(8, target_.config().vocab_size, 4);
  const auto expected = Reference(prompts, 16);
  testing::PlantedDrafter drafter(target_, 16, 5);
  // Room for about two requests at a time although eight may run.
  EngineConfig config{.policy = LengthPolicy::Parse("dflash").value(),
                      .max_running = 8,
                      .kv_tokens = 2 * (40 + 16 + 16)};
  const EngineRun run = RunPrompts(target_, &drafter, config, prompts, Greedy(16));
  EXPECT_EQ(testing::FirstDifference(run.outputs, expected), "");
  EXPECT_EQ(run.free_pages_after, run.total_pages);

  auto engine = Engine::Create(target_, &drafter, config).value();
  const Result<RequestId> too_big = engine->Submit(std::vector<int32_t>(200, 1), Greedy(16));
  EXPECT_EQ(too_big.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(too_big.status().message().rfind("prompt: the KV cache holds ", 0), 0u)
      << too_big.status().message();
}

// Admission (Engine::Admit): a request short of KV pages does not hold up later ones that fit,
// but is passed over at most max_running times; then nothing behind it starts first. Outputs
// are plain decoding's whatever the order. (Pages of 16 positions; plain decoding reserves
// prompt + max_tokens, and no request stops early: no stop ids.)
TEST_F(EngineTest, ARequestShortOfPagesIsPassedOverBoundedly) {
  auto engine = Engine::Create(target_, nullptr, {.max_running = 3, .kv_tokens = 6 * 16}).value();
  const auto prompts = RandomPrompts(2, target_.config().vocab_size, 8, 8);
  std::map<RequestId, int32_t> first_step;  // the step of each request's first token
  int32_t step = 0;
  const auto submit = [&](const std::vector<int32_t>& prompt, int32_t max_tokens) {
    GenerationParams params{.max_tokens = max_tokens};
    params.on_tokens = [&](const TokenEvent& e) { first_step.try_emplace(e.id, step); };
    return engine->Submit(prompt, params).value();
  };
  const RequestId long_a = submit(prompts[0], 56);  // 4 pages
  ASSERT_TRUE(engine->Step().ok());
  const RequestId long_b = submit(prompts[0], 56);  // 4 pages: 2 are free
  std::vector<RequestId> small;                     // 1 page each
  for (int i = 0; i < 4; ++i) small.push_back(submit(prompts[1], 4));
  for (step = 1; engine->running() > 0 || engine->queued() > 0; ++step) {
    ASSERT_TRUE(engine->Step().ok());
  }
  // The first three pass long_b (the third once the first ended), the fourth waits behind it.
  EXPECT_LT(first_step[small[0]], first_step[long_b]);
  EXPECT_LT(first_step[small[1]], first_step[long_b]);
  EXPECT_LT(first_step[small[2]], first_step[long_b]);
  EXPECT_GE(first_step[small[3]], first_step[long_b]);
  std::map<RequestId, std::vector<int32_t>> outputs;
  for (RequestResult& r : engine->TakeFinished()) outputs[r.id] = r.output_ids;
  const auto expected_long = Reference({prompts[0]}, 56, /*ignore_eos=*/true)[0];
  const auto expected_small = Reference({prompts[1]}, 4, /*ignore_eos=*/true)[0];
  EXPECT_EQ(testing::FirstDifference(outputs[long_a], expected_long), "");
  EXPECT_EQ(testing::FirstDifference(outputs[long_b], expected_long), "");
  for (RequestId id : small) EXPECT_EQ(testing::FirstDifference(outputs[id], expected_small), "");
}

// A client request's choices (one GenerationParams::group) run at most ⌈max_running / 2⌉ at once,
// and the requests behind them start beside them.
TEST_F(EngineTest, AGroupRunsAtMostHalfTheSlots) {
  auto engine = Engine::Create(target_, nullptr, {.max_running = 4}).value();
  const auto prompts = RandomPrompts(2, target_.config().vocab_size, 6, 6);
  GenerationParams choice = Greedy(12);
  choice.group = 7;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(engine->Submit(prompts[0], choice).ok());
  const RequestId other = engine->Submit(prompts[1], Greedy(12)).value();
  ASSERT_TRUE(engine->Step().ok());
  EXPECT_EQ(engine->running(), 3);  // two choices and `other`
  EXPECT_EQ(engine->queued(), 2);
  ASSERT_TRUE(engine->RunToCompletion().ok());
  const auto expected = Reference(prompts, 12);
  for (const RequestResult& r : engine->TakeFinished()) {
    EXPECT_EQ(testing::FirstDifference(r.output_ids, expected[r.id == other ? 1 : 0]), "");
  }
}

// A request may fill the whole context, and max_running of them fit the cache sized for that
// many full contexts (KvTokensForDemand, what `dscale serve` sizes by default) and run at once:
// every position a step writes or stages — the last step's whole block included, drafted by the
// real DFlash drafter or by the planted one that gets long drafts accepted — lies in the pages
// the request reserved. Outputs stay plain greedy decoding's, every token of max_tokens.
TEST_F(EngineTest, FullContextsFitACacheSizedForThemAndRunAtOnce) {
  DecoderConfig config = EngineTestTargetConfig();
  constexpr int64_t kContext = 80;
  config.max_position_embeddings = kContext;
  DecoderModel target(config, RandomDecoderWeights(config, 5, DType::kF32));
  std::unique_ptr<DFlashDrafter> dflash = testing::RandomDrafter(target, 9);
  testing::PlantedDrafter planted(target, 16, /*salt=*/21);
  const std::vector<int32_t> lengths = {79, 50, 17, 1};  // + max_tokens = the context each
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<int32_t>> expected;
  for (size_t i = 0; i < lengths.size(); ++i) {
    std::vector<int32_t> p(lengths[i]);
    for (int32_t j = 0; j < lengths[i]; ++j) p[j] = static_cast<int32_t>((7 * j + 3 * i + 1) % 120);
    expected.push_back(
        GreedyDecode(target, p, {.max_new_tokens = static_cast<int32_t>(kContext) - lengths[i]})
            .value());
    prompts.push_back(std::move(p));
  }
  const std::vector<std::pair<std::string, Drafter*>> modes = {
      {"none", nullptr}, {"dflash", dflash.get()}, {"dflash", &planted}, {"fixed:16", &planted}};
  for (const auto& [mode, drafter] : modes) {
    const int32_t block = drafter != nullptr ? 16 : 1;
    const auto running = static_cast<int32_t>(prompts.size());
    EngineConfig ec{.policy = LengthPolicy::Parse(mode).value(),
                    .max_running = running,
                    .kv_tokens = KvTokensForDemand(running, kContext - 1, 1, block, 16)};
    auto engine = Engine::Create(target, drafter, ec).value();
    EXPECT_EQ(engine->MaxRequestTokens(), kContext) << mode;
    std::vector<RequestId> ids;
    for (const auto& p : prompts) {
      const GenerationParams params{.max_tokens = static_cast<int32_t>(kContext - p.size())};
      ids.push_back(engine->Submit(p, params).value());
    }
    // The first step admits every request (none waits for pages); the 79-token prompt with
    // max_tokens 1 ends at its prefill.
    ASSERT_TRUE(engine->Step().ok());
    EXPECT_EQ(engine->queued(), 0) << mode << ": all full contexts run at once";
    EXPECT_EQ(engine->running(), running - 1) << mode;
    ASSERT_TRUE(engine->RunToCompletion().ok());
    std::vector<RequestResult> results = engine->TakeFinished();
    ASSERT_EQ(results.size(), prompts.size());
    for (const RequestResult& r : results) {
      const size_t i = static_cast<size_t>(std::find(ids.begin(), ids.end(), r.id) - ids.begin());
      ASSERT_LT(i, prompts.size());
      EXPECT_EQ(r.finish_reason, FinishReason::kLength) << mode << " " << r.error;
      EXPECT_EQ(static_cast<int64_t>(prompts[i].size() + r.output_ids.size()), kContext) << mode;
      EXPECT_EQ(testing::FirstDifference(r.output_ids, expected[i]), "");
    }
    EXPECT_EQ(engine->free_kv_pages(), engine->total_kv_pages()) << mode;

    // One token more is the context's limit, named by the field at fault.
    const Status longer = engine->CheckRequest(prompts[0], {.max_tokens = 2});
    EXPECT_EQ(longer.code(), StatusCode::kOutOfRange) << mode;
    EXPECT_EQ(longer.message().rfind("max_tokens: ", 0), 0u) << longer.message();
    EXPECT_NE(longer.message().find("must be at most 1: the context length is 80 tokens"),
              std::string::npos)
        << longer.message();
    EXPECT_EQ(longer.message().find("KV cache"), std::string::npos) << longer.message();
    const Status whole(engine->CheckRequest(std::vector<int32_t>(kContext, 1), {.max_tokens = 1}));
    EXPECT_EQ(whole.code(), StatusCode::kOutOfRange) << mode;
    EXPECT_EQ(whole.message().rfind("prompt: ", 0), 0u) << whole.message();
  }
}

// A cache smaller than one request's context (--kv-tokens) bounds prompt + max_tokens by what it
// holds for one request, MaxRequestTokens: that much runs to the end, one token more is refused
// as out of range, naming the KV cache.
TEST_F(EngineTest, ASmallCacheBoundsOneRequestByWhatItHolds) {
  std::unique_ptr<DFlashDrafter> dflash = testing::RandomDrafter(target_, 9);
  testing::PlantedDrafter planted(target_, 16, /*salt=*/5);
  for (Drafter* drafter : {static_cast<Drafter*>(dflash.get()), static_cast<Drafter*>(&planted)}) {
    const EngineConfig ec{.policy = LengthPolicy::Parse("dflash").value(), .kv_tokens = 48};
    auto engine = Engine::Create(target_, drafter, ec).value();
    ASSERT_EQ(engine->MaxRequestTokens(), 48 - 16 + 2);
    const std::vector<int32_t> prompt = RandomPrompts(1, target_.config().vocab_size, 8, 20)[0];
    const auto max_tokens = static_cast<int32_t>(34 - prompt.size());
    const EngineRun run = RunPrompts(target_, drafter, ec, {prompt}, {.max_tokens = max_tokens});
    EXPECT_EQ(run.outputs[0].size(), static_cast<size_t>(max_tokens));
    EXPECT_EQ(run.free_pages_after, run.total_pages);
    const Status over = engine->CheckRequest(prompt, {.max_tokens = max_tokens + 1});
    EXPECT_EQ(over.code(), StatusCode::kOutOfRange);
    EXPECT_EQ(over.message().rfind("max_tokens: ", 0), 0u) << over.message();
    EXPECT_NE(over.message().find("must be at most " + std::to_string(max_tokens) +
                                  ": the KV cache holds 34 tokens (prompt + max_tokens) per "
                                  "request, less than the context length"),
              std::string::npos)
        << over.message();
    const Status prompt_alone =
        engine->CheckRequest(std::vector<int32_t>(34, 1), {.max_tokens = 1});
    EXPECT_EQ(prompt_alone.message().rfind("prompt: ", 0), 0u) << prompt_alone.message();
  }
}

TEST_F(EngineTest, SubmitRejectsBadRequestsWithClearErrors) {
  auto engine = Engine::Create(target_, nullptr, {}).value();
  EXPECT_NE(engine->Submit({}, Greedy(4)).status().message().find("prompt"), std::string::npos);
  EXPECT_NE(engine->Submit({1, 131}, Greedy(4)).status().message().find("token id 131"),
            std::string::npos);
  EXPECT_NE(engine->Submit({1}, Greedy(0)).status().message().find("max_tokens"),
            std::string::npos);
  GenerationParams p = Greedy(4);
  p.sampling.top_p = 0;
  EXPECT_NE(engine->Submit({1}, p).status().message().find("top_p"), std::string::npos);
  p = Greedy(4);
  p.stop_strings = {"x"};
  EXPECT_NE(engine->Submit({1}, p).status().message().find("tokenizer"), std::string::npos);
  EXPECT_NE(engine->Submit({1}, Greedy(5000)).status().message().find("context length"),
            std::string::npos);
  EXPECT_FALSE(
      Engine::Create(target_, nullptr, {.policy = LengthPolicy::Parse("dflash").value()}).ok());
}

TEST_F(EngineTest, StreamsTokensAndStopsOnStopIds) {
  const auto prompts = RandomPrompts(1, target_.config().vocab_size, 6);
  const std::vector<int32_t> free_run = Reference(prompts, 12)[0];
  ASSERT_GE(free_run.size(), 6u);
  testing::PlantedDrafter drafter(target_, 16, 11);
  auto engine =
      Engine::Create(target_, &drafter, {.policy = LengthPolicy::Parse("dflash").value()}).value();
  std::vector<int32_t> streamed;
  FinishReason last = FinishReason::kNone;
  GenerationParams params{.max_tokens = 12, .stop_ids = {free_run[5]}};
  params.on_tokens = [&](const TokenEvent& e) {
    streamed.insert(streamed.end(), e.new_tokens.begin(), e.new_tokens.end());
    last = e.finished;
  };
  ASSERT_TRUE(engine->Submit(prompts[0], params).ok());
  ASSERT_TRUE(engine->RunToCompletion().ok());
  const std::vector<RequestResult> done = engine->TakeFinished();
  ASSERT_EQ(done.size(), 1u);
  const auto stop = std::find(free_run.begin(), free_run.end(), free_run[5]);
  EXPECT_EQ(testing::FirstDifference(done[0].output_ids,
                                     std::vector<int32_t>(free_run.begin(), stop + 1)),
            "");
  EXPECT_EQ(streamed, done[0].output_ids);
  EXPECT_EQ(last, FinishReason::kStop);
}

}  // namespace
}  // namespace dscale

namespace dscale {
namespace {

using DScaleEngineTest = testing::EngineFixture;

// dscale verifies k_i rows per request chosen by the DVL allocator; greedy output must equal
// plain decoding, on either KV dtype (as EngineKvDtypeTest), token for token.
class DScaleEngineKvDtypeTest : public DScaleEngineTest,
                                public ::testing::WithParamInterface<KvDtype> {};

TEST_P(DScaleEngineKvDtypeTest, GreedyOutputEqualsPlainDecodingAtHighConcurrency) {
  const KvDtype kv = GetParam();
  const auto prompts = RandomPrompts(64, target_.config().vocab_size, 7);
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) {
    expected.push_back(GreedyDecode(target_, p, {.max_new_tokens = 24, .kv_dtype = kv}).value());
  }
  std::unique_ptr<DFlashDrafter> dflash = testing::RandomDrafter(target_, 9);
  testing::PlantedDrafter planted(target_, 16, /*salt=*/5);
  for (Drafter* drafter : std::vector<Drafter*>{&planted, dflash.get()}) {
    for (int32_t c : {8, 16, 32}) {
      EngineConfig config{.policy = LengthPolicy::Parse("dscale").value(),
                          .max_running = c,
                          .kv_dtype = kv,
                          .inputs = {.predictor = &predictor_}};
      const EngineRun run = RunPrompts(target_, drafter, config, prompts, {.max_tokens = 24});
      EXPECT_EQ(testing::FirstDifference(run.outputs, expected), "") << "c=" << c;
      EXPECT_EQ(run.free_pages_after, run.total_pages);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KvDtypes, DScaleEngineKvDtypeTest,
                         ::testing::Values(KvDtype::kBf16, KvDtype::kF32), testing::KvDtypeCase);

// Every decode step verifies W·N/2 rows — fewer only where the requests' blocks, cut at the
// tokens each may still commit, hold fewer — and the lengths differ between requests.
TEST_F(DScaleEngineTest, VerifiesHalfTheBlockCapacityEveryStep) {
  const auto prompts = RandomPrompts(24, target_.config().vocab_size, 8);
  testing::PlantedDrafter planted(target_, 16, /*salt=*/6);
  constexpr int32_t kMaxTokens = 30;
  std::map<RequestId, int32_t> produced;  // output tokens before the step (the first: prefill's)
  int64_t steps_seen = 0, cut_steps = 0;
  EngineConfig config{.policy = LengthPolicy::Parse("dscale").value(),
                      .max_running = 16,
                      .inputs = {.predictor = &predictor_},
                      .on_step = [&](const StepRecord& step) {
                        int64_t rows = 0, block_rows = 0;
                        for (size_t i = 0; i < step.ids.size(); ++i) {
                          const int32_t left =
                              kMaxTokens - produced.try_emplace(step.ids[i], 1).first->second;
                          EXPECT_LE(step.rows[i], left) << "a row past the output's end";
                          rows += step.rows[i];
                          block_rows += std::min(16, left);
                          produced[step.ids[i]] += step.accepted[i] + 1;
                        }
                        const auto half = static_cast<int64_t>(8 * step.ids.size());
                        EXPECT_EQ(rows, std::min(half, block_rows)) << "step " << step.step;
                        ++steps_seen;
                        cut_steps += block_rows < half ? 1 : 0;
                      }};
  auto engine = Engine::Create(target_, &planted, config).value();
  for (const auto& p : prompts) ASSERT_TRUE(engine->Submit(p, {.max_tokens = kMaxTokens}).ok());
  ASSERT_TRUE(engine->RunToCompletion().ok());
  std::set<int32_t> accepted_lengths;
  EXPECT_GT(steps_seen, 5);
  EXPECT_GT(cut_steps, 0);
  for (const RequestResult& r : engine->TakeFinished()) {
    accepted_lengths.insert(r.accepted.begin(), r.accepted.end());
  }
  EXPECT_GT(accepted_lengths.size(), 4u) << "allocations and accepts should vary";
}

// --weights int8 and int4: speculation is lossless with respect to the target as served, with
// f32 activations and with activations quantised per 32 inputs (--int8-activations int8, where a
// verified row's int8 dot products and their f32 order are a decode row's: gemm_int8.h; int4
// rows, whether through the fused few-row kernel or unpacked, compute the same: gemm_int4.h).
// With the projections and LM head quantised (from BF16 weights, as a checkpoint's are), greedy
// outputs of every speculative mode — dflash with a trained-like and a planted drafter, fixed:16,
// dscale at the paper's budget and with auto, dspark — equal plain greedy decoding of the
// quantised target, token for token.
class Int8EngineTest
    : public ::testing::TestWithParam<std::tuple<WeightsMode, cpu::Int8Activations>> {};

TEST_P(Int8EngineTest, SpeculativeGreedyOutputEqualsPlainDecodingOfTheQuantisedTarget) {
  const auto [mode, activations] = GetParam();
  DecoderWeights weights = RandomDecoderWeights(EngineTestTargetConfig(), 5, DType::kBF16);
  QuantizeProjections(&weights, mode);
  DecoderModel target(EngineTestTargetConfig(), std::move(weights));
  target.set_activations({.int8 = activations});
  const dvl::Predictor predictor = testing::RandomPredictor(64, 131, 3);
  const auto prompts = RandomPrompts(24, target.config().vocab_size, 11);
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) {
    expected.push_back(GreedyDecode(target, p, {.max_new_tokens = 24}).value());
  }
  std::unique_ptr<DFlashDrafter> dflash = testing::RandomDrafter(target, 9);
  testing::PlantedDrafter planted(target, 16, /*salt=*/23);
  const budget::SpsTable sps = {.tokens = {1, 16, 64, 512}, .steps_per_second = {500, 200, 60, 8}};
  struct Mode {
    const char* spec;
    const char* budget;
    Drafter* drafter;
  };
  for (const Mode& mode : {Mode{"dflash", "0.5", dflash.get()}, Mode{"dflash", "0.5", &planted},
                           Mode{"fixed:16", "0.5", &planted}, Mode{"dscale", "0.5", dflash.get()},
                           Mode{"dscale", "auto", &planted}, Mode{"dspark", "0.5", &planted}}) {
    for (int32_t c : {1, 16}) {
      SCOPED_TRACE(::testing::Message() << mode.spec << " budget " << mode.budget << " c=" << c);
      EngineConfig config{
          .policy = LengthPolicy::Parse(mode.spec).value(),
          .max_running = c,
          .inputs = {.predictor = &predictor,
                     .verify_budget = budget::VerifyBudget::Parse(mode.budget).value()}};
      if (config.policy.mode == SpecMode::kDSpark) config.inputs.sps_table = &sps;
      const EngineRun run = RunPrompts(target, mode.drafter, config, prompts, {.max_tokens = 24});
      EXPECT_EQ(testing::FirstDifference(run.outputs, expected), "");
      EXPECT_EQ(run.free_pages_after, run.total_pages);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    WeightsAndActivations, Int8EngineTest,
    ::testing::Combine(::testing::Values(WeightsMode::kInt8, WeightsMode::kInt4),
                       ::testing::Values(cpu::Int8Activations::kF32, cpu::Int8Activations::kInt8)),
    [](const ::testing::TestParamInfo<std::tuple<WeightsMode, cpu::Int8Activations>>& info) {
      return std::string(WeightsModeName(std::get<0>(info.param))) + "_" +
             std::string(cpu::Int8ActivationsName(std::get<1>(info.param)));
    });

// --activations bf16: with each projection's activations rounded to BF16 (and BF16 dot
// products where the CPU has them), a verified row still computes what a decode row does, so
// dflash and dscale greedy outputs equal plain greedy decoding of the same target, token for
// token.
TEST(Bf16ActivationsEngineTest, SpeculativeGreedyOutputEqualsPlainDecoding) {
  DecoderModel target(EngineTestTargetConfig(),
                      RandomDecoderWeights(EngineTestTargetConfig(), 5, DType::kBF16));
  target.set_activations({.bf16 = cpu::Bf16Activations::kBf16});
  const dvl::Predictor predictor = testing::RandomPredictor(64, 131, 3);
  const auto prompts = RandomPrompts(24, target.config().vocab_size, 12);
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) {
    expected.push_back(GreedyDecode(target, p, {.max_new_tokens = 24}).value());
  }
  std::unique_ptr<DFlashDrafter> dflash = testing::RandomDrafter(target, 9);
  testing::PlantedDrafter planted(target, 16, /*salt=*/22);
  const std::vector<std::pair<std::string, Drafter*>> modes = {{"dflash", dflash.get()},
                                                               {"dflash", &planted},
                                                               {"fixed:16", &planted},
                                                               {"dscale", dflash.get()}};
  for (const auto& [mode, drafter] : modes) {
    for (int32_t c : {1, 16}) {
      SCOPED_TRACE(::testing::Message() << mode << " c=" << c);
      EngineConfig config{.policy = LengthPolicy::Parse(mode).value(),
                          .max_running = c,
                          .inputs = {.predictor = &predictor}};
      const EngineRun run = RunPrompts(target, drafter, config, prompts, {.max_tokens = 24});
      EXPECT_EQ(testing::FirstDifference(run.outputs, expected), "");
      EXPECT_EQ(run.free_pages_after, run.total_pages);
    }
  }
}

TEST_F(DScaleEngineTest, NeedsAPredictorAndSixteenRowBlocks) {
  testing::PlantedDrafter planted(target_, 16, 1);
  const auto no_predictor =
      Engine::Create(target_, &planted, {.policy = LengthPolicy::Parse("dscale").value()});
  EXPECT_NE(no_predictor.status().message().find("--predictor"), std::string::npos);
  testing::PlantedDrafter short_block(target_, 8, 1);
  const auto short_blocks = Engine::Create(
      target_, &short_block,
      {.policy = LengthPolicy::Parse("dscale").value(), .inputs = {.predictor = &predictor_}});
  EXPECT_NE(short_blocks.status().message().find("block size 16"), std::string::npos);
}

}  // namespace
}  // namespace dscale

namespace dscale {
namespace {

// fixed:K reads K − 1 candidates of each block, so the drafter is asked for those and scores
// only them; a policy that reads the whole block asks for all. Plain greedy decoding's tokens
// either way.
TEST(EngineDraftingTest, FixedRowsAskTheDrafterForTheCandidatesTheyVerify) {
  const DecoderConfig c = testing::EngineTestTargetConfig();
  DecoderModel target(c, RandomDecoderWeights(c, 5, DType::kBF16));
  std::unique_ptr<DFlashDrafter> drafter = testing::RandomDrafter(target, 6);
  const int32_t candidates = drafter->block_size() - 1;
  CpuBackend cpu(target, drafter.get());
  struct Asking final : testing::DelegatingBackend {
    using DelegatingBackend::DelegatingBackend;
    Status Draft(std::span<const DraftRequest> requests, const PagedKvCache& cache, int tile_rows,
                 DraftOutput* out) override {
      for (const DraftRequest& r : requests) asked.insert(r.candidates);
      const Status drafted = DelegatingBackend::Draft(requests, cache, tile_rows, out);
      scored.insert(out->candidates);
      return drafted;
    }
    std::set<int32_t> asked, scored;
  };
  const auto prompts = testing::RandomPrompts(6, c.vocab_size, 41, /*max_length=*/30);
  const GenerationParams params{.max_tokens = 12};
  const testing::EngineRun plain = testing::RunPrompts(
      target, nullptr, {.policy = LengthPolicy::Parse("none").value(), .max_running = 3}, prompts,
      params);
  for (const auto& [spec, read] : {std::pair{"fixed:4", 3}, {"dflash", candidates}}) {
    Asking asking(cpu);
    const testing::EngineRun run = testing::RunPrompts(
        asking, {.policy = LengthPolicy::Parse(spec).value(), .max_running = 3}, prompts, params);
    EXPECT_EQ(asking.asked, std::set<int32_t>{read}) << spec;
    EXPECT_EQ(asking.scored, std::set<int32_t>{read}) << spec;
    EXPECT_EQ(testing::FirstDifference(run.outputs, plain.outputs), "") << spec;
  }
}

}  // namespace
}  // namespace dscale
