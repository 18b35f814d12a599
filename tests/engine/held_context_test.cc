// Rows held for a draft context while auto decodes plainly (engine/held_context.h): they join
// the context in one call, in order, and the drafts made after them are the bits the drafts
// made after feeding every row at once would be.

#include "engine/held_context.h"

#include <gtest/gtest.h>

#include <bit>
#include <memory>
#include <vector>

#include "backend/cpu_backend.h"
#include "budget/step_time_source.h"
#include "engine/engine.h"
#include "engine_test_util.h"
#include "kv/paged_kv_cache.h"

namespace dscale {
namespace {

// Records each AppendContext call's rows, and forwards everything else to `inner`.
class RecordingDrafter final : public Drafter {
 public:
  explicit RecordingDrafter(Drafter* inner = nullptr) : inner_(inner) {}

  int32_t block_size() const override { return inner_ ? inner_->block_size() : 16; }
  const std::vector<int32_t>& feature_layers() const override {
    return inner_ ? inner_->feature_layers() : no_layers_;
  }
  void Bind(const PagedKvCache& cache) override {
    if (inner_) inner_->Bind(cache);
  }
  void AppendContext(const ContextRows& rows) override {
    calls.push_back({std::vector<float>(rows.features.begin(), rows.features.end()),
                     std::vector<int32_t>(rows.positions.begin(), rows.positions.end()),
                     std::vector<int32_t>(rows.slots.begin(), rows.slots.end())});
    if (inner_) inner_->AppendContext(rows);
  }
  Status Draft(std::span<const DraftRequest> requests, const PagedKvCache& cache, int tile_rows,
               DraftOutput* out) override {
    return inner_->Draft(requests, cache, tile_rows, out);
  }

  struct Call {
    std::vector<float> features;
    std::vector<int32_t> positions, slots;
  };
  std::vector<Call> calls;

 private:
  Drafter* inner_;
  std::vector<int32_t> no_layers_;
};

TEST(HeldContextTest, EveryRequestsRowsJoinInOneCallInTheOrderGiven) {
  PagedKvCache cache(
      KvCacheShape{.num_layers = 1, .kv_heads = 1, .head_dim = 8, .page_size = 4, .num_pages = 8});
  const int32_t a = cache.AddSequence(), b = cache.AddSequence();
  ASSERT_TRUE(cache.Reserve(a, 12).ok() && cache.Reserve(b, 12).ok());
  constexpr int64_t kWidth = 3;
  // Two passes: request a's rows at positions 5, 6 then 7; request b's at 2 then 3.
  const auto pass_of = [&](StepBatch& batch, ForwardOutput& out, int32_t seq, int32_t position,
                           std::vector<int32_t> tokens, float base) {
    AddRequestRows(batch, seq, position, tokens, cache, /*all_logits=*/false);
    for (int64_t i = 0; i < batch.rows() * kWidth; ++i) out.features.push_back(base + float(i));
    return TargetPass{.rows = &batch, .out = &out};
  };
  StepBatch batch1, batch2, batch3;
  ForwardOutput out1, out2, out3;
  HeldContext held_a, held_b, scratch;
  held_a.Hold(pass_of(batch1, out1, a, 5, {1, 2}, 100), kWidth, 0, 2);
  held_b.Hold(pass_of(batch2, out2, b, 2, {3}, 200), kWidth, 0, 1);
  held_a.Hold(pass_of(batch3, out3, a, 7, {4, 9}, 300), kWidth, 0, 1);  // its first row only
  EXPECT_EQ(held_a.rows(), 3);
  EXPECT_EQ(held_b.rows(), 1);

  RecordingDrafter drafter;
  HeldContext* const both[] = {&held_b, &held_a};
  EXPECT_EQ(HeldContext::Release(both, drafter, scratch), 4);
  ASSERT_EQ(drafter.calls.size(), 1u);
  const RecordingDrafter::Call& call = drafter.calls[0];
  EXPECT_EQ(call.positions, (std::vector<int32_t>{2, 5, 6, 7}));
  std::vector<int32_t> slots;
  for (const auto& [batch, first, count] :
       {std::tuple{&batch2, 0, 1}, std::tuple{&batch1, 0, 2}, std::tuple{&batch3, 0, 1}}) {
    const auto s = batch->kv_slots().subspan(first, count);
    slots.insert(slots.end(), s.begin(), s.end());
  }
  EXPECT_EQ(call.slots, slots);
  EXPECT_EQ(call.features,
            (std::vector<float>{200, 201, 202, 100, 101, 102, 103, 104, 105, 300, 301, 302}));
  EXPECT_TRUE(held_a.empty() && held_b.empty());
  // Nothing held: no call.
  EXPECT_EQ(HeldContext::Release(both, drafter, scratch), 0);
  EXPECT_EQ(drafter.calls.size(), 1u);
}

// Auto at one request on planted step times where speculation never pays (the tiny CPU pair's,
// feeding free so that both engines keep the context): it decodes plainly and probes the
// request's draft context now and then. The host engine holds the plain steps' rows and appends
// them right before each probe, in fewer calls; the feeding engine appends every step's. The
// drafts of every probe are the same bits, so every decision and token is the same. (Two
// prompts, each admitted to a probe: a later admission between probes keeps a context only
// where rows are held, which would part the two engines' decisions.)
class HeldContextEngineTest : public testing::EngineFixture {};

TEST_F(HeldContextEngineTest, DraftsAfterHeldRowsAreTheDraftsAfterFedRows) {
  const auto prompts = testing::RandomPrompts(2, target_.config().vocab_size, 31, 20);
  budget::SimulatedPair cpu = budget::CpuShapedPair();
  cpu.feed_seconds_per_row = 0;
  const budget::PlantedStepTimes times(cpu);
  EngineConfig config{.policy = LengthPolicy::Parse("dscale").value(),
                      .max_running = 1,
                      .inputs = {.predictor = &predictor_,
                                 .verify_budget = budget::VerifyBudget::Parse("auto").value()}};
  struct Run {
    std::vector<std::vector<int32_t>> tokens;   // per drafted step: each request's drafts
    std::vector<std::vector<uint32_t>> logits;  // and their logits' bits
    std::vector<std::vector<int32_t>> outputs;
    size_t append_calls = 0;
    int64_t appended_rows = 0;
    bool ended_plain = false;
  };
  const auto run = [&](bool held) {
    std::unique_ptr<DFlashDrafter> dflash = testing::RandomDrafter(target_, 9);
    RecordingDrafter drafter(dflash.get());
    CpuBackend host(target_, &drafter);
    // Not all passes on the host (PassesOnHost false): every committed row is fed at once.
    testing::DelegatingBackend feeding(host);
    StepBackend& backend = held ? static_cast<StepBackend&>(host) : feeding;
    Run r;
    EngineConfig c = config;
    c.on_step = [&](const StepRecord& s) {
      if (s.drafts == nullptr || s.drafts->tokens.empty()) return;
      r.tokens.push_back(s.drafts->tokens);
      std::vector<uint32_t> bits;
      for (float x : s.drafts->logits) bits.push_back(std::bit_cast<uint32_t>(x));
      r.logits.push_back(std::move(bits));
    };
    const testing::EngineRun result =
        testing::RunPrompts(backend, c, prompts, {.max_tokens = 120}, &times);
    r.outputs = result.outputs;
    r.append_calls = drafter.calls.size();
    for (const auto& call : drafter.calls) r.appended_rows += std::ssize(call.positions);
    r.ended_plain =
        result.stats.auto_budget && result.stats.auto_budget->mode == budget::AutoMode::kPlain;
    return r;
  };
  const Run held = run(true), fed = run(false);
  EXPECT_TRUE(held.ended_plain);
  EXPECT_EQ(held.outputs, fed.outputs);
  // Probes within each request, after the plain steps the first ones leave.
  EXPECT_GE(held.tokens.size(), 8u);
  EXPECT_EQ(held.tokens, fed.tokens);
  EXPECT_EQ(held.logits, fed.logits);
  EXPECT_EQ(held.appended_rows, fed.appended_rows);
  EXPECT_LT(2 * held.append_calls, fed.append_calls);
}

}  // namespace
}  // namespace dscale
