// The engine thread and its bounded queue: outputs match the engine run directly, the slot
// bound holds under concurrency, cancellation frees the KV.

#include "server/engine_loop.h"

#include <gtest/gtest.h>

#include <thread>

#include "model/poisoned_target.h"
#include "model/random_checkpoint.h"
#include "server_test_util.h"
#include "support/tiny_models.h"

namespace dscale::server {
namespace {

using namespace std::chrono_literals;

// Reads a channel to the end: the text and the final update.
RequestChannel::Update Drain(RequestChannel& channel) {
  RequestChannel::Update all, u;
  while (!all.done) {
    if (!channel.Wait(5s, &u)) {
      ADD_FAILURE() << "no output within 5 s";
      return all;
    }
    all.text += u.text;
    all.done = u.done;
    all.outcome = u.outcome;
    all.usage = u.usage;
    all.error = u.error;
  }
  return all;
}

class EngineLoopTest : public ::testing::Test {
 protected:
  EngineLoopTest()
      : target_(dscale::testing::EngineLoopConfig(),
                RandomDecoderWeights(dscale::testing::EngineLoopConfig(), 3, DType::kF32)) {
    drafter_ = dscale::testing::RandomDrafter(target_, 4);
  }

  // On target_, or on `target` when given.
  std::unique_ptr<Engine> MakeEngine(TargetModel* target = nullptr) {
    const Tokenizer& tok = testing::ServerTokenizer();
    EngineConfig config{.policy = LengthPolicy::Parse("dflash").value(),
                        .max_running = 4,
                        .kv_tokens = 4096,
                        .token_text = [&tok](int32_t id) { return OutputTokenText(tok, id); }};
    return Engine::Create(target ? *target : target_, drafter_.get(), config).value();
  }

  PreparedRequest Request(std::vector<int32_t> prompt, int32_t max_tokens) {
    return {.prompt = std::move(prompt), .params = {.max_tokens = max_tokens}};
  }

  DecoderModel target_;
  std::unique_ptr<DFlashDrafter> drafter_;
};

TEST(SlotGateTest, BoundHoldsUnderConcurrency) {
  SlotGate gate(3);
  EXPECT_TRUE(gate.TryAcquire());
  EXPECT_TRUE(gate.TryAcquire());
  EXPECT_TRUE(gate.TryAcquire());
  EXPECT_FALSE(gate.TryAcquire());
  gate.Release();
  EXPECT_TRUE(gate.TryAcquire());
  for (int i = 0; i < 3; ++i) gate.Release();
  EXPECT_EQ(gate.used(), 0);

  std::atomic<int32_t> held{0}, most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        if (!gate.TryAcquire()) continue;
        const int32_t now = ++held;
        int32_t seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        --held;
        gate.Release();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(most.load(), 3);
  EXPECT_EQ(gate.used(), 0);
}

TEST_F(EngineLoopTest, TextMatchesTheEngineRunAlone) {
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3}, {40, 41}, {7}, {300, 5, 9, 11}};
  std::vector<std::string> want;
  for (const auto& prompt : prompts) {
    std::unique_ptr<Engine> engine = MakeEngine();
    ASSERT_TRUE(engine->Submit(prompt, {.max_tokens = 12}).ok());
    ASSERT_TRUE(engine->RunToCompletion().ok());
    want.push_back(OutputTextOf(testing::ServerTokenizer(), engine->TakeFinished()[0].output_ids));
  }
  std::unique_ptr<Engine> engine = MakeEngine();
  EngineLoop loop(*engine, testing::ServerTokenizer(), 16);
  loop.Start();
  std::vector<std::shared_ptr<RequestChannel>> channels;
  for (const auto& prompt : prompts) {
    channels.push_back(std::make_shared<RequestChannel>());
    ASSERT_TRUE(loop.Submit(Request(prompt, 12), channels.back()).ok());
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const RequestChannel::Update u = Drain(*channels[i]);
    EXPECT_EQ(u.text, want[i]) << "prompt " << i;
    EXPECT_EQ(u.outcome, Outcome::kLength);
    EXPECT_EQ(u.usage.prompt_tokens, static_cast<int64_t>(prompts[i].size()));
    EXPECT_EQ(u.usage.completion_tokens, 12);
  }
  loop.Stop();
  const EngineMetrics m = loop.Metrics();
  EXPECT_EQ(m.finished[static_cast<int>(Outcome::kLength)], 4);
  EXPECT_EQ(m.generation_tokens, 48);
  EXPECT_EQ(m.free_kv_pages, m.total_kv_pages);
  EXPECT_EQ(m.block_size, 16);
  EXPECT_GT(m.stats.decode_steps, 0);
}

// Usage counts the prompt tokens the prefix cache supplied, and with thinking on the output up
// to the reasoning block's closing token (all of an output that never closed it).
TEST_F(EngineLoopTest, UsageCountsCachedPromptAndReasoningTokens) {
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 70; ++i) prompt.push_back(100 + i);
  std::unique_ptr<Engine> alone = MakeEngine();
  ASSERT_TRUE(alone->Submit(prompt, {.max_tokens = 12}).ok());
  ASSERT_TRUE(alone->RunToCompletion().ok());
  const std::vector<int32_t> output = alone->TakeFinished()[0].output_ids;
  const int32_t close = output[4];
  const int64_t through_close = std::find(output.begin(), output.end(), close) - output.begin() + 1;
  int32_t absent = 0;
  while (std::find(output.begin(), output.end(), absent) != output.end()) ++absent;

  const Tokenizer& tok = testing::ServerTokenizer();
  const EngineConfig config{.policy = LengthPolicy::Parse("dflash").value(),
                            .max_running = 4,
                            .page_size = 16,
                            .kv_tokens = 4096,
                            .prefix_cache = true,
                            .token_text = [&tok](int32_t id) { return OutputTokenText(tok, id); }};
  std::unique_ptr<Engine> engine = Engine::Create(target_, drafter_.get(), config).value();
  EngineLoop loop(*engine, tok, 16);
  loop.Start();
  std::vector<RequestChannel::Update> ends;
  for (const std::optional<int32_t> token :
       {std::optional<int32_t>(), std::optional(close), std::optional(absent)}) {
    PreparedRequest request = Request(prompt, 12);
    request.reasoning_close_token = token;
    auto channel = std::make_shared<RequestChannel>();
    ASSERT_TRUE(loop.Submit(std::move(request), channel).ok());
    ends.push_back(Drain(*channel));
  }
  loop.Stop();
  EXPECT_EQ(ends[0].usage.cached_prompt_tokens, 0);
  EXPECT_EQ(ends[1].usage.cached_prompt_tokens, 64);  // the prompt's whole pages but the last row's
  EXPECT_EQ(ends[2].usage.cached_prompt_tokens, ends[1].usage.cached_prompt_tokens);
  EXPECT_EQ(ends[0].usage.reasoning_tokens, 0);
  EXPECT_EQ(ends[1].usage.reasoning_tokens, through_close);
  EXPECT_EQ(ends[2].usage.reasoning_tokens, 12);
}

// The loop run on the calling thread (as `dscale serve` runs it, on the thread that loaded the
// models): another thread submits, reads the text the engine writes alone, and stops the loop,
// which then returns.
TEST_F(EngineLoopTest, RunOnTheCallingThreadServesUntilStopped) {
  const std::vector<int32_t> prompt = {40, 41, 42};
  std::unique_ptr<Engine> alone = MakeEngine();
  ASSERT_TRUE(alone->Submit(prompt, {.max_tokens = 10}).ok());
  ASSERT_TRUE(alone->RunToCompletion().ok());
  const std::string want =
      OutputTextOf(testing::ServerTokenizer(), alone->TakeFinished()[0].output_ids);

  std::unique_ptr<Engine> engine = MakeEngine();
  EngineLoop loop(*engine, testing::ServerTokenizer(), 4);
  RequestChannel::Update got;
  std::thread client([&] {
    auto channel = std::make_shared<RequestChannel>();
    if (loop.Submit(Request(prompt, 10), channel).ok()) got = Drain(*channel);
    loop.Stop();
  });
  loop.RunOnThisThread();
  client.join();
  EXPECT_EQ(got.text, want);
  EXPECT_EQ(got.outcome, Outcome::kLength);
  EXPECT_EQ(loop.in_flight(), 0);
  EXPECT_EQ(loop.Metrics().free_kv_pages, loop.Metrics().total_kv_pages);
}

// A request whose logits turn NaN (an overflowing model) fails alone with a 500 saying why;
// the others complete and every KV page is free afterwards.
TEST_F(EngineLoopTest, ARequestThatCannotBeSampledFailsAloneWith500) {
  const int32_t marker = 511;
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 2, 3}, {marker, 4, 5}, {7}, {300, 5, 9, 11}, {marker, 8}};
  dscale::testing::PoisonedTarget poisoned(target_, marker, /*from_position=*/6);
  std::unique_ptr<Engine> engine = MakeEngine(&poisoned);
  EngineLoop loop(*engine, testing::ServerTokenizer(), 16);
  loop.Start();
  std::vector<std::shared_ptr<RequestChannel>> channels;
  for (size_t i = 0; i < prompts.size(); ++i) {
    channels.push_back(std::make_shared<RequestChannel>());
    PreparedRequest request = Request(prompts[i], 12);
    request.params.sampling = {.temperature = i == 1 ? 1.0f : 0.0f, .seed = 1};
    ASSERT_TRUE(loop.Submit(std::move(request), channels.back()).ok());
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const RequestChannel::Update u = Drain(*channels[i]);
    if (prompts[i][0] != marker) {
      EXPECT_EQ(u.outcome, Outcome::kLength) << "prompt " << i;
      EXPECT_EQ(u.usage.completion_tokens, 12);
      continue;
    }
    EXPECT_EQ(u.outcome, Outcome::kError) << "prompt " << i;
    ASSERT_TRUE(u.error.has_value());
    EXPECT_EQ(u.error->status, 500);
    EXPECT_EQ(u.error->type, "server_error");
    EXPECT_NE(u.error->message.find("is NaN"), std::string::npos) << u.error->message;
  }
  loop.Stop();
  const EngineMetrics m = loop.Metrics();
  EXPECT_EQ(m.finished[static_cast<int>(Outcome::kError)], 2);
  EXPECT_EQ(m.finished[static_cast<int>(Outcome::kLength)], 3);
  EXPECT_EQ(m.free_kv_pages, m.total_kv_pages);
  EXPECT_EQ(loop.in_flight(), 0);
}

TEST_F(EngineLoopTest, RefusesBeyondItsSlots) {
  std::unique_ptr<Engine> engine = MakeEngine();
  EngineLoop loop(*engine, testing::ServerTokenizer(), 2);
  auto a = std::make_shared<RequestChannel>(), b = std::make_shared<RequestChannel>(),
       c = std::make_shared<RequestChannel>();
  ASSERT_TRUE(loop.Submit(Request({1}, 4), a).ok());
  ASSERT_TRUE(loop.Submit(Request({2}, 4), b).ok());
  const Result<uint64_t> refused = loop.Submit(Request({3}, 4), c);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(loop.in_flight(), 2);
  loop.Start();
  Drain(*a);
  Drain(*b);
  // Slots are freed as requests end.
  for (int i = 0; i < 100 && loop.in_flight() > 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(loop.in_flight(), 0);
  EXPECT_TRUE(loop.Submit(Request({3}, 4), c).ok());
  EXPECT_TRUE(Drain(*c).done);
}

TEST_F(EngineLoopTest, CancelFreesTheKv) {
  std::unique_ptr<Engine> engine = MakeEngine();
  EngineLoop loop(*engine, testing::ServerTokenizer(), 4);
  loop.Start();
  auto channel = std::make_shared<RequestChannel>();
  const Result<uint64_t> ticket = loop.Submit(Request({1, 2}, 1500), channel);
  ASSERT_TRUE(ticket.ok());
  RequestChannel::Update u;
  ASSERT_TRUE(channel->Wait(5s, &u));  // it is running
  loop.Cancel(*ticket);
  loop.Cancel(*ticket + 100);  // unknown tickets are ignored
  const RequestChannel::Update last = Drain(*channel);
  EXPECT_EQ(last.outcome, Outcome::kCancelled);
  EXPECT_LT(last.usage.completion_tokens, 1500);
  loop.Stop();
  const EngineMetrics m = loop.Metrics();
  EXPECT_EQ(m.free_kv_pages, m.total_kv_pages);
  EXPECT_EQ(m.finished[static_cast<int>(Outcome::kCancelled)], 1);
  EXPECT_EQ(loop.in_flight(), 0);
}

TEST_F(EngineLoopTest, StopStringsEndTheRequest) {
  // Find what the model says, then stop on a piece of it.
  std::unique_ptr<Engine> probe = MakeEngine();
  ASSERT_TRUE(probe->Submit({5, 6}, {.max_tokens = 20}).ok());
  ASSERT_TRUE(probe->RunToCompletion().ok());
  const std::string full =
      OutputTextOf(testing::ServerTokenizer(), probe->TakeFinished()[0].output_ids);
  // Two ASCII bytes from the middle of the text (whole characters) make the stop string.
  size_t at = 2;
  while (at + 1 < full.size() && (static_cast<unsigned char>(full[at]) >= 0x80 ||
                                  static_cast<unsigned char>(full[at + 1]) >= 0x80)) {
    ++at;
  }
  ASSERT_LT(at + 1, full.size()) << "no ASCII pair in " << full;
  const std::string stop = full.substr(at, 2);
  const std::string want = full.substr(0, full.find(stop));

  std::unique_ptr<Engine> engine = MakeEngine();
  EngineLoop loop(*engine, testing::ServerTokenizer(), 4);
  loop.Start();
  auto channel = std::make_shared<RequestChannel>();
  PreparedRequest request = Request({5, 6}, 20);
  request.params.stop_strings = {stop};
  ASSERT_TRUE(loop.Submit(std::move(request), channel).ok());
  const RequestChannel::Update u = Drain(*channel);
  EXPECT_EQ(u.text, want);
  EXPECT_EQ(u.outcome, Outcome::kStop);
}

}  // namespace
}  // namespace dscale::server
