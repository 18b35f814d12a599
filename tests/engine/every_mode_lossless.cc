#include "every_mode_lossless.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "budget/sps_table.h"
#include "budget/verify_budget.h"
#include "engine/engine.h"
#include "engine_test_util.h"
#include "model/greedy_decode.h"
#include "planted_drafter.h"

namespace dscale::testing {

void ExpectEveryModeEqualsPlainDecoding(DecoderModel& target, Drafter* drafter, double min_tau) {
  const DecoderConfig& c = target.config();
  const dvl::Predictor predictor = RandomPredictor(c.hidden_size, c.vocab_size, 3);
  const auto prompts = RandomPrompts(24, c.vocab_size, 13);
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) {
    expected.push_back(
        GreedyDecode(target, p, {.max_new_tokens = 20, .stop_ids = c.eos_token_ids}).value());
  }
  std::unique_ptr<DFlashDrafter> dflash = RandomDrafter(target, 9);
  PlantedDrafter planted(target, 16, /*salt=*/24);
  if (drafter != nullptr) {
    ASSERT_EQ(drafter->block_size(), 16);
  }
  // The drafter each policy runs with: the one given, else these two.
  Drafter* random = drafter != nullptr ? drafter : dflash.get();
  Drafter* accepted = drafter != nullptr ? drafter : &planted;
  const double tau_floor = drafter != nullptr ? min_tau : 1.5;
  const budget::SpsTable sps = {.tokens = {1, 16, 64, 512}, .steps_per_second = {500, 200, 60, 8}};
  struct Mode {
    const char* spec;
    const char* budget;
    Drafter* drafter;
  };
  const Mode modes[] = {Mode{"none", "0.5", nullptr},      Mode{"dflash", "0.5", random},
                        Mode{"dflash", "0.5", accepted},   Mode{"fixed:4", "0.5", accepted},
                        Mode{"fixed:16", "0.5", accepted}, Mode{"dscale", "0.5", random},
                        Mode{"dscale", "auto", accepted},  Mode{"dspark", "0.5", accepted}};
  int64_t mixed_prefill_rows = 0;  // prompt rows that rode in a verify pass, over every run
  for (size_t i = 0; i < std::size(modes); ++i) {
    const Mode& mode = modes[i];
    if (i == 2 && modes[1].drafter == mode.drafter) continue;  // one drafter given: dflash once
    for (int32_t concurrency : {1, 16}) {
      SCOPED_TRACE(::testing::Message()
                   << mode.spec << " budget " << mode.budget << " c=" << concurrency);
      // Every other mode's prompts never wait for company (a mixture of experts' prompts
      // otherwise may, EngineConfig::prompt_wait_steps), so that some ride in verify passes.
      EngineConfig config{
          .policy = LengthPolicy::Parse(mode.spec).value(),
          .max_running = concurrency,
          .prompt_wait_steps = i % 2 == 0 ? EngineConfig{}.prompt_wait_steps : 0,
          .inputs = {.predictor = &predictor,
                     .verify_budget = budget::VerifyBudget::Parse(mode.budget).value()}};
      if (config.policy.UsesSpsTable()) config.inputs.sps_table = &sps;
      const EngineRun run = RunPrompts(target, mode.drafter, config, prompts,
                                       {.max_tokens = 20, .stop_ids = c.eos_token_ids});
      EXPECT_EQ(FirstDifference(run.outputs, expected), "");
      EXPECT_EQ(run.free_pages_after, run.total_pages);
      mixed_prefill_rows += run.stats.mixed_prefill_rows;
      // (auto reads the clock and may find that nothing pays: then it decodes plainly.)
      if (mode.drafter == accepted && std::string(mode.budget) != "auto" && tau_floor > 0) {
        EXPECT_GT(run.stats.tau(), tau_floor) << "drafts must be accepted";
      }
    }
  }
  EXPECT_GT(mixed_prefill_rows, 0) << "requests admitted while others decode prefill in their "
                                      "verify passes (mixed prefill)";
}

}  // namespace dscale::testing
